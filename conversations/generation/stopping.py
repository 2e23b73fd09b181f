"""Whether a running reply must stop, and who asked first."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from conversations.generation.rows import RecordedStop

logger = logging.getLogger("chatsite.generation")


class Stopping:
    """A reply stops when asked to (from the group, the row, the grace period or a caller in this
    process: the first Stop counts) or when its row was settled by someone else (nothing it
    writes would be kept). Either way `stop_engine` is called, once."""

    def __init__(self, request_id: str, stop_engine: Callable[[], None]) -> None:
        self.stop: RecordedStop | None = None  # the first Stop that reached us
        self.lost = False  # someone else settled our row: nothing we write will be kept
        self._request_id = request_id
        self._stop_engine = stop_engine
        self._event = asyncio.Event()  # set with stop or lost

    @property
    def wanted(self) -> bool:
        return self.stop is not None or self.lost

    def request(self, stop: RecordedStop) -> None:
        if self.stop is not None:
            return
        self.stop = stop
        self._event.set()
        logger.info("cancel received request_id=%s, stopping the engine", self._request_id)
        self._stop_engine()

    def row_lost(self) -> None:
        if self.lost:
            return
        self.lost = True
        self._event.set()
        logger.warning("reply row settled elsewhere request_id=%s", self._request_id)
        self._stop_engine()

    async def unless_stopped(self, work: Coroutine[Any, Any, object]) -> bool:
        """Wait for `work` or a stop, whichever comes first: True once the work is done (its
        error raised here), False if a stop came first (the work is cancelled)."""
        doing = asyncio.ensure_future(work)
        stopped = asyncio.ensure_future(self._event.wait())
        try:
            await asyncio.wait({doing, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            if not doing.done():
                doing.cancel()
        if self.wanted:
            return False
        doing.result()
        return True
