"""What one socket (a tab) has shown of each reply streaming in its conversation. Pure: no I/O.

Group messages can be dropped (a full channel) or overtake each other (a delta before its
Started event, a delta before the snapshot it belongs after), so a tab keeps, per reply, how many
characters it has shown. Deltas carry their offset: a duplicate is skipped, a gap means "ask the
generation for a snapshot", and deltas that arrive while a snapshot is awaited are kept and
applied after it. A reply the tab hears nothing about for a while is reported as silent, so the
consumer can look it up in the database (its process may have died).
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Deltas kept per reply while a snapshot is awaited; past that the snapshot alone must do.
MAX_WAITING_DELTAS = 256
# A snapshot request with no answer after this long is sent again: a layer that drops messages
# (a full channel) may have dropped the request, or the answer, and the tab shows nothing new
# until one arrives.
ASK_AGAIN_S = 0.5


@dataclass(frozen=True)
class Append:
    """Show `text` after the first `offset` characters shown so far."""

    offset: int
    text: str


@dataclass(frozen=True)
class Replace:
    """Show `text` in place of whatever is shown of the reply."""

    text: str


@dataclass(frozen=True)
class AskSnapshot:
    """This tab lost track of the reply: ask its generation for the text so far."""

    reason: str  # "joined" mid-reply, a "gap" in the offsets, or a "resync" after silence


@dataclass
class _Reply:
    shown: int | None = 0  # None while waiting for a snapshot
    heard_at: float = 0.0
    waiting: list[tuple[int, str]] = field(default_factory=list)  # (offset, text) while None
    asked_at: float = 0.0  # when a snapshot was last asked for


class TabState:
    def __init__(self, quiet_s: float):
        self.quiet_s = quiet_s
        self._replies: dict[int, _Reply] = {}
        self._settled: set[int] = set()

    @property
    def writing(self) -> int | None:
        """The reply this tab shows being written, if any (the latest: ids only grow)."""
        return max(self._replies, default=None)

    def started(self, message_id: int, now: float, shown: int = 0) -> bool:
        """A reply started, showing `shown` characters (a continued reply's text so far); False
        if it already finished here (a late event: show nothing)."""
        if message_id in self._settled:
            return False
        # A delta that overtook this event has already asked for a snapshot: keep waiting for it.
        self._replies.setdefault(message_id, _Reply(shown=shown, heard_at=now))
        return True

    def delta(
        self, message_id: int, offset: int, text: str, now: float
    ) -> Append | AskSnapshot | None:
        if message_id in self._settled:
            return None
        reply = self._replies.get(message_id)
        if reply is None:  # joined mid-reply, or the delta overtook its Started event
            reply = self._replies[message_id] = _Reply(shown=None)
            return self._ask(reply, now, "joined", offset, text)
        if reply.shown is None:
            # Not "heard": if our snapshot request was lost, the silence must make us ask again.
            if len(reply.waiting) < MAX_WAITING_DELTAS:
                reply.waiting.append((offset, text))
            return None
        if offset > reply.shown:  # frames were lost (a full channel drops them silently)
            return self._ask(reply, now, "gap", offset, text)
        reply.heard_at = now
        if offset + len(text) <= reply.shown:
            return None  # already shown
        shown, reply.shown = reply.shown, offset + len(text)
        return Append(shown, text[shown - offset :])

    def snapshot(self, message_id: int, text: str, now: float) -> str | None:
        """The whole text to show now, or None (a late or stale snapshot)."""
        reply = self._replies.get(message_id)
        if message_id in self._settled or reply is None:
            return None
        if reply.shown is not None and len(text) <= reply.shown:
            return None  # we already show at least this much
        # Deltas that came while we waited continue the snapshot where they overlap it.
        for offset, delta in sorted(reply.waiting):
            if offset <= len(text) < offset + len(delta):
                text += delta[len(text) - offset :]
        reply.waiting.clear()
        reply.shown = len(text)
        reply.heard_at = now
        return text

    def catch_up(self, message_id: int, content: str) -> Append | Replace | None:
        """The end of the saved reply this tab has not shown: its last delta was lost or is still
        on its way behind the finish. Shown before the finish, so the live text ends complete;
        the whole of it if the tab lost track and was still waiting for a snapshot."""
        reply = self._replies.get(message_id)
        if reply is None:
            return None
        if reply.shown is None:
            reply.shown, reply.waiting = len(content), []
            return Replace(content)
        if len(content) <= reply.shown:
            return None
        shown, reply.shown = reply.shown, len(content)
        return Append(shown, content[shown:])

    def finished(self, message_id: int) -> bool:
        """True the first time: render the final state; later (or late) finishes change nothing."""
        if message_id in self._settled:
            return False
        self._settled.add(message_id)
        self._replies.pop(message_id, None)
        return True

    def pinged(self, message_id: int, now: float) -> None:
        reply = self._replies.get(message_id)
        if reply is not None and reply.shown is not None:
            reply.heard_at = now

    def resync(self, message_id: int, now: float) -> AskSnapshot:
        """Ask (again) for a snapshot of a reply this tab shows or should show."""
        self._settled.discard(message_id)
        reply = self._replies.setdefault(message_id, _Reply())
        return self._ask(reply, now, "resync")

    def unanswered(self, now: float) -> list[int]:
        """Replies whose snapshot request has had no answer for ASK_AGAIN_S: ask again now."""
        due = [
            message_id
            for message_id, reply in self._replies.items()
            if reply.shown is None and now - reply.asked_at >= ASK_AGAIN_S
        ]
        for message_id in due:
            self._replies[message_id].asked_at = now
        return due

    def silent(self, now: float) -> list[int]:
        """Replies this tab follows but has heard nothing about for quiet_s."""
        return [mid for mid, reply in self._replies.items() if now - reply.heard_at >= self.quiet_s]

    @property
    def following(self) -> bool:
        return bool(self._replies)

    def forget(self) -> None:
        """Follow nothing more, as a new tab would: its socket is closing."""
        self._replies.clear()
        self._settled.clear()

    def _ask(
        self, reply: _Reply, now: float, reason: str, offset: int = 0, text: str = ""
    ) -> AskSnapshot:
        reply.shown = None
        reply.heard_at = reply.asked_at = now
        reply.waiting = [(offset, text)] if text else []
        return AskSnapshot(reason)
