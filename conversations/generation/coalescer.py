"""The reply's text and what of it the tabs have been sent: pure bookkeeping, no I/O.

Engines produce many small deltas; each one sent to every tab costs a channel-layer message per
tab. The first token goes out at once (time to first token is what users feel), later ones are
merged into at most one frame per `interval_s`. Every frame carries its character offset, so a
tab can tell a gap (a dropped frame) from a duplicate.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Frame:
    offset: int
    text: str


class Coalescer:
    def __init__(self, interval_s: float, shown: str = ""):
        """`shown`: text the tabs already have (a reply continued from there)."""
        self.interval_s = interval_s
        self._parts: list[str] = [shown] if shown else []
        self._unsent: list[str] = []
        self.length = len(shown)  # characters of the reply, received from the engine or shown
        self.sent = len(shown)  # characters handed out in frames; always <= length
        self._last_frame_at = float("-inf")

    @property
    def text(self) -> str:
        return "".join(self._parts)

    @property
    def has_text(self) -> bool:
        return self.length > 0

    def add(self, delta: str) -> None:
        self._parts.append(delta)
        self._unsent.append(delta)
        self.length += len(delta)

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
