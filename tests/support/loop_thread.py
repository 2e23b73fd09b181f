"""An event loop in a thread of its own, for Hypothesis tests of async code."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

from tests.support.db import close_worker_connections
from tests.support.sockets import Socket, conversation_communicator, signed_in_session

T = TypeVar("T")


class LoopThread:
    """An event loop that keeps running between examples, in a thread of its own.

    Hypothesis calls the test once per frame; if the socket's loop only ran during those calls,
    every pause between them would stall the consumer's reads from Redis until they time out.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def close(self) -> None:
        self.run(_cancel_other_tasks())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


async def _cancel_other_tasks() -> None:
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


@contextlib.contextmanager
def socket_on_a_loop(user: Any, conversation_id: Any) -> Iterator[tuple[LoopThread, Socket]]:
    """One socket of `user`'s on the conversation, on a LoopThread, for every example of a
    Hypothesis test: the point is that it survives all of them (checked when the block ends)."""
    session_key = signed_in_session(user)

    async def open_socket() -> Socket:
        communicator = conversation_communicator(user, conversation_id, session_key=session_key)
        connected, _ = await communicator.connect(timeout=10)
        assert connected
        return Socket(communicator)

    runner = LoopThread()
    socket = runner.run(open_socket())
    yield runner, socket
    crashed = socket.communicator.future.done()
    with contextlib.suppress(Exception):
        runner.run(socket.communicator.disconnect())
    runner.run(close_worker_connections())
    runner.close()
    assert not crashed, "the consumer stopped"
