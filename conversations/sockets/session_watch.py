"""A socket lives no longer than the session it was opened with.

The socket re-checks its session (conversations.services.sessions) before acting on a frame, when
its user's sessions change, and when the session expires; a session that ended closes it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime

from channels.db import database_sync_to_async
from django.utils import timezone

from conversations.services import sessions

logger = logging.getLogger("chatsite.socket")

# Past the expiry, so the session read then has expired rather than being about to.
EXPIRY_MARGIN_S = 0.5


class SessionWatch:
    """Checks one socket's session; calls `ended` (close the socket) once it no longer signs its
    user in.

    `sleep` is how the watch waits for the expiry (a test passes one it drives).
    """

    def __init__(
        self,
        session_key: str | None,
        user_id: int,
        *,
        ended: Callable[[], Awaitable[None]],
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.session_key = session_key
        self.user_id = user_id
        self._ended = ended
        self._sleep = sleep
        self._expiry: asyncio.Task[None] | None = None

    async def signed_in(self) -> bool:
        """Re-check the session as a request would; call `ended` (and say False) if it ended."""
        alive: bool = await database_sync_to_async(sessions.session_signs_in)(
            self.session_key, self.user_id
        )
        if not alive:
            await self.end()
        return alive

    async def end(self) -> None:
        """The session ended (found so here, or on the way: a send refused for it)."""
        logger.info("session ended: closing a socket of user %s", self.user_id)
        await self._ended()

    async def changed(self, ended_session: str | None) -> None:
        """The user's sessions changed: `ended_session` ended (if it is ours, we end too), or
        something else did (a new password, a deactivation) that only a check can tell."""
        if ended_session and ended_session == self.session_key:
            await self.end()
        else:
            await self.signed_in()

    def close_at_expiry(self, expires: datetime | None) -> asyncio.Task[None]:
        """Re-check the session when it expires (and again whenever it was used meanwhile);
        the task ends once the session has."""
        self._expiry = asyncio.create_task(self._close_at_expiry(expires))
        return self._expiry

    def stop(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()

    async def _close_at_expiry(self, expires: datetime | None) -> None:
        while expires is not None:
            await self._sleep(
                max(0.0, (expires - timezone.now()).total_seconds()) + EXPIRY_MARGIN_S
            )
            if not await self.signed_in():
                return
            expires = await database_sync_to_async(sessions.session_expires_at)(self.session_key)
