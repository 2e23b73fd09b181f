"""The reply's text and what of it the tabs have been sent: pure bookkeeping, no I/O.

Engines produce many small deltas; each one sent to every tab costs a channel-layer message per
tab. The first token goes out at once (time to first token is what users feel), later ones are
merged into at most one frame per `interval_s`. Every frame carries its character offset, so a
tab can tell a gap (a dropped frame) from a duplicate.

The text has two ends besides the engine's own: `max_chars` (the reply is whole there, as at
max_tokens) and a stop, which keeps only what was sent: the held-back text and whatever the
engine produces after it were never shown, so they are not kept either.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Frame:
    offset: int
    text: str


class Coalescer:
    def __init__(self, interval_s: float, shown: str = "", *, max_chars: int | None = None):
        """`shown`: text the tabs already have (a reply continued from there). `max_chars`: the
        longest the reply may be, `shown` included (None: no limit)."""
        self.interval_s = interval_s
        self.max_chars = max_chars
        self._parts: list[str] = [shown] if shown else []
        self._unsent: list[str] = []
        self.length = len(shown)  # characters of the reply, received from the engine or shown
        self.sent = len(shown)  # characters handed out in frames; always <= length
        self.full = False  # it reached max_chars: the reply ends there
        self.closed = False  # it takes no more text (full, or stopped)
        self.dropped = False  # text the engine produced is not kept (past the limit, or a stop)
        self._last_frame_at = float("-inf")

    @property
    def text(self) -> str:
        return "".join(self._parts)

    @property
    def has_text(self) -> bool:
        return self.length > 0

    def add(self, delta: str) -> bool:
        """Take the engine's next text, cut at max_chars; False if none of it is kept."""
        if self.closed:
            self.dropped = True
            return False
        if self.max_chars is not None and self.length + len(delta) >= self.max_chars:
            room = max(0, self.max_chars - self.length)
            self.dropped = room < len(delta)
            delta = delta[:room]
            self.full = self.closed = True
        if not delta:
            return False
        self._parts.append(delta)
        self._unsent.append(delta)
        self.length += len(delta)
        return True

    def stop(self, *, received: int | None = None) -> None:
        """A Stop: take no more text and keep only what was sent, or less: `received`, the
        characters a reader had when it left. One that ended at max_chars stops nothing."""
        if self.full:
            return
        self.closed = True
        self._unsent.clear()
        keep = self.sent if received is None else min(self.sent, received)
        if keep < self.length:
            self.dropped = True
            kept = self.text[:keep]
            self._parts = [kept] if kept else []
            self.length = keep
        self.sent = keep

    def frame_due_in(self, now: float) -> float:
        """Seconds until the next frame may go out; 0 when it may go now (or nothing is sent yet)."""
        if self._last_frame_at == float("-inf"):
            return 0.0
        return max(0.0, self._last_frame_at + self.interval_s - now)

    def take_frame(self, now: float) -> Frame | None:
        """The text not sent yet, as one frame; None if there is none."""
        if not self._unsent:
            return None
        frame = Frame(self.sent, "".join(self._unsent))
        self._unsent.clear()
        self.sent += len(frame.text)
        self._last_frame_at = now
        return frame

    def snapshot(self) -> str:
        """Everything the tabs were sent: a frame taken after this continues exactly where it ends."""
        return self.text[: self.sent]
