"""The frames a socket has read and not yet acted on: a few at most, acted on one at a time.

Acting on a frame waits for the database thread. Meanwhile the consumer goes on reading frames
(refusing those over the rate, see throttle.py) and streaming replies; frames that arrive while
the queue is full are refused "busy" rather than held, so a client cannot pile up work.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from django.utils.translation import gettext_lazy as _

Frame = str | bytes

BUSY = _("Still working on your earlier messages. Try again in a moment.")


class FrameQueue:
    """Acts on the frames put into it with `act`, one at a time, in the order they came.

    `size` frames may wait while one is acted on. A frame whose `act` raises stops the queue:
    `failed` is told the error, and later frames wait until `stop()` drops them.
    """

    def __init__(
        self,
        act: Callable[[Frame], Awaitable[None]],
        *,
        size: int,
        failed: Callable[[Exception], Awaitable[None]],
    ) -> None:
        self._act = act
        self._failed = failed
        self._pending: asyncio.Queue[Frame | None] = asyncio.Queue(maxsize=size)
        self._worker = asyncio.create_task(self._act_on_frames())

    def put(self, frame: Frame) -> bool:
        """Queue `frame`; False when `size` frames already wait (refuse it: the client is busy)."""
        try:
            self._pending.put_nowait(frame)
        except asyncio.QueueFull:
            return False
        return True

    async def stop(self) -> None:
        """Drop the frames still waiting and let the one under way finish (it may have saved a
        message whose reply must start)."""
        while not self._pending.empty():
            self._pending.get_nowait()
        self._pending.put_nowait(None)
        await self._worker

    async def _act_on_frames(self) -> None:
        while (frame := await self._pending.get()) is not None:
            try:
                await self._act(frame)
            except Exception as error:
                await self._failed(error)
                return
