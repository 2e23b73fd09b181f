"""A socket's frames are acted on one at a time, in the order they came; a few wait, the rest are
refused, and a closing socket drops what waits but finishes what it started."""

from __future__ import annotations

import asyncio

from conversations.sockets.frame_queue import Frame, FrameQueue

BOUND_S = 2


class Worker:
    """An `act` the test drives: each frame it acts on waits until the test lets it finish."""

    def __init__(self) -> None:
        self.started: asyncio.Queue[Frame] = asyncio.Queue()
        self.done: list[Frame] = []
        self.failures: list[Exception] = []
        self.go_on = asyncio.Event()

    async def act(self, frame: Frame) -> None:
        self.started.put_nowait(frame)
        if frame == "fails":
            raise RuntimeError("the frame could not be acted on")
        await self.go_on.wait()
        self.done.append(frame)

    async def failed(self, error: Exception) -> None:
        self.failures.append(error)

    async def next_started(self) -> Frame:
        return await asyncio.wait_for(self.started.get(), BOUND_S)


async def test_it_acts_in_the_order_frames_came_and_refuses_beyond_its_size() -> None:
    worker = Worker()
    queue = FrameQueue(worker.act, size=2, failed=worker.failed)
    assert queue.put("first")
    assert await worker.next_started() == "first"
    assert queue.put(b"second") and queue.put("third"), "two may wait while one is acted on"
    assert not queue.put("fourth"), "a third waiting frame is refused"

    worker.go_on.set()
    assert [await worker.next_started() for _ in range(2)] == [b"second", "third"]
    await queue.stop()
    assert worker.done == ["first", b"second", "third"]
    assert worker.failures == []


async def test_stopping_drops_the_frames_waiting_and_finishes_the_one_under_way() -> None:
    worker = Worker()
    queue = FrameQueue(worker.act, size=3, failed=worker.failed)
    for frame in ("under way", "waits", "waits too"):
        assert queue.put(frame)
    assert await worker.next_started() == "under way"

    stopping = asyncio.create_task(queue.stop())
    await asyncio.sleep(0)  # one turn of the loop: stop() now waits for the frame under way
    assert not stopping.done()
    worker.go_on.set()
    await asyncio.wait_for(stopping, BOUND_S)
    assert worker.done == ["under way"], "it may have saved a message whose reply must start"
    assert worker.started.empty()


async def test_a_frame_that_fails_stops_the_queue_and_is_reported() -> None:
    worker = Worker()
    worker.go_on.set()
    queue = FrameQueue(worker.act, size=2, failed=worker.failed)
    assert queue.put("fails")
    assert queue.put("after it")
    assert await worker.next_started() == "fails"
    await asyncio.wait_for(queue.stop(), BOUND_S)
    assert [str(error) for error in worker.failures] == ["the frame could not be acted on"]
    assert worker.done == [], "nothing is acted on after a failure"
