"""How fast sockets may send frames: token buckets (the caller passes the time).

A person sends a message or presses Stop a few times a minute; a script flooding frames would
otherwise queue work for the process's one database thread and slow every other user down.
Each socket has a bucket, and so does each user in each process, shared by all their sockets
there: thirty sockets cannot send thirty bursts at once. Frames over either rate are answered
`slow_down`; a socket that keeps sending them is closed.
"""

from __future__ import annotations

import weakref

from django.conf import settings


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


# A user's bucket lives while one of their sockets holds it, and no longer.
_users: weakref.WeakValueDictionary[int, FrameBucket] = weakref.WeakValueDictionary()


class SocketFrames:
    """One socket's limit: its own bucket and its user's, both of which a frame must pass."""

    def __init__(self, user_id: int, *, socket: tuple[float, int], user: tuple[float, int]):
        self.own = FrameBucket(*socket)
        users = _users.get(user_id)
        if users is None:
            users = _users[user_id] = FrameBucket(*user)
        self.users = users
        self.refused_in_a_row = 0

    @classmethod
    def from_settings(cls, user_id: int) -> SocketFrames:
        """A new socket's limit at the configured rates (CHAT_SOCKET_* and CHAT_USER_*)."""
        return cls(
            user_id,
            socket=(settings.CHAT_SOCKET_FRAMES_PER_SECOND, settings.CHAT_SOCKET_FRAME_BURST),
            user=(settings.CHAT_USER_FRAMES_PER_SECOND, settings.CHAT_USER_FRAME_BURST),
        )

    def allow(self, now: float) -> bool:
        if self.own.allow(now) and self.users.allow(now):
            self.refused_in_a_row = 0
            return True
        self.refused_in_a_row += 1
        return False

    @property
    def flooding(self) -> bool:
        """More frames refused in a row than this socket's burst (as configured when it opened):
        a script, not a person (close it)."""
        return self.refused_in_a_row > self.own.burst
