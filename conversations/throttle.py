"""How fast one socket may send frames: a token bucket, pure (the caller passes the time).

A person sends a message or presses Stop a few times a minute; a script flooding frames would
otherwise queue work for the process's one database thread and slow every other user down.
Frames over the rate are answered `slow_down`; a socket that keeps flooding is closed.
"""

from __future__ import annotations


class FrameBucket:
    def __init__(self, per_second: float, burst: int):
        self.per_second = per_second
        self.burst = burst
        self._tokens = float(burst)
        self._updated: float | None = None
        self.refused_in_a_row = 0

    def allow(self, now: float) -> bool:
        """Take one token for a frame; False if the socket is over its rate."""
        if self._updated is not None:
            self._tokens = min(self.burst, self._tokens + (now - self._updated) * self.per_second)
        self._updated = now
        if self._tokens >= 1:
            self._tokens -= 1
            self.refused_in_a_row = 0
            return True
        self.refused_in_a_row += 1
        return False
