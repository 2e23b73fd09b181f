"""A call ends when the token it came with is revoked, in whichever process that happens.

While its reply is written, the call's response listens on a channel of its own in its token's
group (events.broadcast.token_group). The revocation's TokenRevoked (services.tokens) stops the
reply through the generation lifecycle, as a client that went away would, recorded as cancelled
by `token_revoked`; the response then ends with a `token_revoked` error. A revocation between
the call's authentication and its joining the group is caught by one look at the token once it
has joined. All of it runs beside the response, never in its way: the first chunk does not wait
for the channel layer.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time

from channels.db import database_sync_to_async

from conversations.events import broadcast
from conversations.events.protocol import TokenRevoked, parse
from conversations.gateway.errors import GatewayError
from conversations.generation import rows
from conversations.generation.running import RunningReply
from conversations.services.tokens import api_token_is_active

logger = logging.getLogger("chatsite.gateway")

TOKEN_REVOKED = "token_revoked"  # cancelled_by, and the error's code


def revoked_error() -> GatewayError:
    return GatewayError(
        401,
        "The API token this call was made with has been revoked; the reply was stopped.",
        code=TOKEN_REVOKED,
    )


class RevocationWatch:
    """Stops `running` if the token `token_id` is revoked before the watch is closed."""

    def __init__(self, token_id: int, running: RunningReply) -> None:
        self.revoked = False
        self._token_id = token_id
        self._running = running
        # In a context of its own: a streamed call's watch outlives its view, whose executor
        # for database work ends when the view returns the response.
        self._task = asyncio.create_task(
            self._watch(), name=f"token-watch-{token_id}", context=contextvars.Context()
        )

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _watch(self) -> None:
        layer = broadcast.layer()
        group = broadcast.token_group(self._token_id)
        try:
            channel = await layer.new_channel()
            await layer.group_add(group, channel)
        except Exception as exc:  # the call goes on; only a revocation would have ended it
            logger.warning("could not watch token %s for revocation: %r", self._token_id, exc)
            return
        try:
            if not await database_sync_to_async(api_token_is_active)(self._token_id):
                await self._stop()
                return
            while True:
                event = parse(await layer.receive(channel))
                if isinstance(event, TokenRevoked) and event.token_id == self._token_id:
                    await self._stop()
                    return
        except Exception as exc:  # the layer failed, or carried what no event is
            logger.warning("stopped watching token %s for revocation: %r", self._token_id, exc)
        finally:
            with contextlib.suppress(Exception):
                await layer.group_discard(group, channel)

    async def _stop(self) -> None:
        self.revoked = True
        logger.info(
            "token revoked request_id=%s, stopping the reply", self._running.plan.request_id
        )
        await self._running.request_stop(
            rows.RecordedStop(rows.unix_time(time.time()), TOKEN_REVOKED)
        )
