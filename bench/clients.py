"""WebSocket clients for the bench, in worker processes of their own.

The orchestrator talks to each worker over a pipe: it sends a command name and keyword
arguments, the worker runs the matching ``Client`` coroutine in its asyncio loop and sends back
the result. Sockets stay open between commands, so one worker can keep 200 streams running
while another takes cancel samples. Every received frame is stamped with time.time() the moment
the socket hands it over, before it is parsed.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import multiprocessing
import random
import time
import traceback
from array import array
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

SUBPROTOCOL = "chatsite.v1.json"
Event = dict[str, Any]


def is_type(kind: str) -> Callable[[Event], bool]:
    return lambda event: event.get("type") == kind


class Sock:
    """One conversation socket; a reader task stamps and dispatches every frame."""

    def __init__(self, ws: ClientConnection):
        self.ws = ws
        self.waiters: list[tuple[Callable[[Event], bool], asyncio.Future[tuple[float, Event]]]] = []
        self.frame_times = array("d")  # delta frames: when they arrived ...
        self.frame_tokens = array("l")  # ... and how many scripted tokens each carried
        self.frame_chars = array("l")
        self.recording = False
        self.active = False  # a reply of ours is streaming (started, not yet finished)
        self.errors: list[str] = []
        self.tasks: set[asyncio.Future[None]] = set()  # strong references: asyncio keeps weak ones
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        with contextlib.suppress(ConnectionClosed):
            await self._dispatch()

    async def _dispatch(self) -> None:
        async for raw in self.ws:
            now = time.time()
            event = json.loads(raw)
            kind = event.get("type")
            if kind == "message.delta" and self.recording:
                text = event["text"]
                self.frame_times.append(now)
                self.frame_tokens.append(text.count(" "))
                self.frame_chars.append(len(text))
            elif kind == "message.started":
                self.active = True
            elif kind == "message.finished":
                self.active = False
            elif kind == "error":
                self.errors.append(event.get("code", "?"))
            for waiter in list(self.waiters):
                predicate, future = waiter
                if predicate(event):
                    self.waiters.remove(waiter)
                    if not future.done():
                        future.set_result((now, event))

    def expect(self, predicate: Callable[[Event], bool]) -> asyncio.Future[tuple[float, Event]]:
        """A future for the next event that matches; register it before the frame that causes it."""
        future: asyncio.Future[tuple[float, Event]] = asyncio.get_running_loop().create_future()
        self.waiters.append((predicate, future))
        return future

    def start_reply_soon(self) -> None:
        self.tasks.add(task := asyncio.ensure_future(self.start_reply()))
        task.add_done_callback(self.tasks.discard)

    async def start_reply(self) -> None:
        try:
            await self.send(action="send", content="Stream please")
        except ConnectionClosed:
            self.errors.append("closed_before_send")

    async def send(self, **frame: Any) -> float:
        sent_at = time.time()
        await self.ws.send(json.dumps(frame))
        return sent_at


async def open_socket(port: int, conversation_id: str, cookie: str, tries: int = 3) -> Sock:
    """Connect; a busy server rejects (403) a handshake it could not accept within daphne's 5 s."""
    for attempt in range(tries):
        try:
            return await _open_socket(port, conversation_id, cookie)
        except (InvalidHandshake, TimeoutError, ConnectionError):
            if attempt == tries - 1:
                raise
    raise AssertionError("unreachable")


async def _open_socket(port: int, conversation_id: str, cookie: str) -> Sock:
    ws = await _connect(port, conversation_id, cookie)
    if ws.subprotocol != SUBPROTOCOL:
        raise RuntimeError("the server did not accept the JSON subprotocol")
    return Sock(ws)


# A "conversation" that names the reference relay (bench/asgi.py) rather than a conversation.
RELAY = "relay"


async def _connect(port: int, conversation_id: str, cookie: str) -> ClientConnection:
    path = (
        "/__bench__/relay/" if conversation_id == RELAY else f"/ws/conversations/{conversation_id}/"
    )
    return await connect(
        f"ws://127.0.0.1:{port}{path}",
        subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
        additional_headers={"Cookie": f"sessionid={cookie}", "Origin": f"http://127.0.0.1:{port}"},
        compression=None,
        proxy=None,
        ping_interval=None,
        open_timeout=120,
        max_size=None,
    )


class Client:
    def __init__(self) -> None:
        self.socks: list[Sock] = []

    async def open(
        self,
        targets: list[tuple[int, str]],
        cookie: str = "",
        parallel: int = 50,
        cookies: list[str] | None = None,
    ) -> dict[str, Any]:
        """Open one socket per (port, conversation id), `parallel` handshakes at a time, as the
        user of `cookie`, or with `cookies`, each target as a user of its own."""
        gate = asyncio.Semaphore(parallel)
        failures: list[str] = []

        async def one(port: int, conversation_id: str, cookie: str) -> None:
            async with gate:
                try:
                    self.socks.append(await open_socket(port, conversation_id, cookie))
                except Exception as exc:
                    failures.append(repr(exc))

        who = cookies if cookies is not None else [cookie] * len(targets)
        await asyncio.gather(*(one(p, c, k) for (p, c), k in zip(targets, who, strict=True)))
        return {"opened": len(self.socks), "failed": len(failures), "errors": failures[:3]}

    async def close_all(self) -> None:
        await asyncio.gather(*(s.ws.close() for s in self.socks), return_exceptions=True)
        for sock in self.socks:
            sock.reader.cancel()
        self.socks.clear()

    async def stream(self, start_at: float, stagger_s: float) -> None:
        """Every open socket sends one message, spread evenly over `stagger_s` from `start_at`."""
        count = max(1, len(self.socks))
        for index, sock in enumerate(self.socks):
            sock.recording = True
            delay = start_at + stagger_s * index / count - time.time()
            asyncio.get_running_loop().call_later(max(0.0, delay), sock.start_reply_soon)

    async def collect(
        self, window_start: float, window_end: float, pace_ms: float
    ) -> dict[str, Any]:
        """Frame gaps beyond the pace and tokens delivered inside the window, over all sockets."""
        await asyncio.sleep(max(0.0, window_end - time.time()))
        excess = array("d")
        tokens = 0
        streaming = 0
        for sock in self.socks:
            times = [t for t in sock.frame_times if window_start <= t <= window_end]
            counts = [
                n
                for t, n in zip(sock.frame_times, sock.frame_tokens, strict=True)
                if window_start <= t <= window_end
            ]
            tokens += sum(counts)
            streaming += bool(times)
            for previous, current in itertools.pairwise(times):
                excess.append((current - previous) * 1000 - pace_ms)
            sock.recording = False
        errors = [e for s in self.socks for e in s.errors]
        return {
            "excess_ms": excess.tobytes(),
            "tokens": tokens,
            "streaming": streaming,
            "errors": errors[:5],
            "error_count": len(errors),
        }

    async def cancel_all(self, timeout: float) -> dict[str, int]:
        """Stop every reply still streaming on our sockets and wait until each has finished.

        Sockets the server closed (a consumer that crashed) are counted, not cancelled: their
        replies stop by themselves once nobody has watched them for the disconnect grace.
        """
        waiting, closed = [], 0
        for sock in self.socks:
            if not sock.active:
                continue
            try:
                finished = sock.expect(is_type("message.finished"))
                await sock.send(action="cancel")
                waiting.append(finished)
            except ConnectionClosed:
                closed += 1
        done, pending = await asyncio.wait(waiting, timeout=timeout) if waiting else (set(), set())
        return {"cancelled": len(done), "unfinished": len(pending), "closed_by_server": closed}

    async def cancel_samples(
        self,
        send_port: int,
        cancel_port: int,
        conversation_ids: list[str],
        cookie: str,
        count: int,
        pace_ms: float,
        seed: int,
        pause_s: float = 0.0,
    ) -> list[dict[str, Any]]:
        """Send, let a few tokens stream, cancel at a random moment, wait for the final state;
        then wait `pause_s` (a person's pace, inside the server's per-socket frame limit).

        The cancel goes out on a second socket connected to `cancel_port` (a second tab, maybe on
        the other process), or on the sending socket itself when the ports are the same. A
        sample that fails (a saturated server drops frames or sockets) is recorded as failed and
        the next one starts afresh in the next conversation; three failures in a row end it.
        """
        rng = random.Random(seed)
        samples: list[dict[str, Any]] = []
        spare = list(conversation_ids)
        failures_in_row = 0
        while len(samples) < count and spare and failures_in_row < 3:
            conversation_id = spare[0]
            socks: list[Sock] = []
            try:
                sender = await open_socket(send_port, conversation_id, cookie)
                socks.append(sender)
                canceller = sender
                if cancel_port != send_port:
                    canceller = await open_socket(cancel_port, conversation_id, cookie)
                    socks.append(canceller)
                while len(samples) < count:
                    samples.append(await _cancel_sample(sender, canceller, pace_ms, rng))
                    failures_in_row = 0
                    await asyncio.sleep(pause_s)
            except (TimeoutError, ConnectionClosed, InvalidHandshake, OSError) as exc:
                samples.append({"failed": f"{exc.__class__.__name__}: {exc}"[:200]})
                failures_in_row += 1
                spare.pop(0)  # its reply may still be running: carry on elsewhere
            finally:
                for sock in socks:
                    await sock.ws.close()
                    sock.reader.cancel()
        return samples

    async def send_together(self, start_at: float, timeout: float) -> list[dict[str, Any]]:
        """Every open socket sends one message at `start_at`; when each was sent, its request id
        and when its first token arrived."""
        socks = list(self.socks)
        started = [s.expect(is_type("message.started")) for s in socks]
        first = [s.expect(is_type("message.delta")) for s in socks]
        await asyncio.sleep(max(0.0, start_at - time.time()))
        sent_at = await asyncio.gather(
            *(s.send(action="send", content="All at once") for s in socks)
        )
        await asyncio.wait([*started, *first], timeout=timeout)
        replies = []
        for sock, when, began, token in zip(socks, sent_at, started, first, strict=True):
            reply: dict[str, Any] = {"sent_at": when, "errors": sock.errors[:3]}
            if began.done():
                reply["request_id"] = began.result()[1]["message"]["request_id"]
            if token.done():
                reply["first_delta_at"] = token.result()[0]
            replies.append(reply)
        return replies

    async def one_reply(
        self, port: int, conversation_id: str, cookie: str, content: str, limit_s: float
    ) -> dict[str, Any]:
        """One whole reply on a fresh socket, with every delta frame's arrival time."""
        sock = await open_socket(port, conversation_id, cookie)
        try:
            sock.recording = True
            finished = sock.expect(is_type("message.finished"))
            sent_at = await sock.send(action="send", content=content)
            finished_at, event = await asyncio.wait_for(finished, limit_s)
        finally:
            await sock.ws.close()
            sock.reader.cancel()
        return {
            "send_sent_at": sent_at,
            "finished_at": finished_at,
            "frame_times": list(sock.frame_times),
            "frame_tokens": list(sock.frame_tokens),
            "frame_chars": list(sock.frame_chars),
            "message": event["message"],
        }

    async def flood(
        self,
        port: int,
        conversation_id: str,
        cookie: str,
        sockets: int,
        duration_s: float,
        reopen_after_s: float | None,
    ) -> dict[str, Any]:
        """Send Stop frames as fast as each of `sockets` sockets can for `duration_s`, opening a
        new socket `reopen_after_s` after the server closes or refuses one (None: never)."""
        deadline = time.monotonic() + duration_s
        counts = {"frames_sent": 0, "closed_by_server": 0, "refused_at_open": 0, "opened": 0}
        answers: dict[str, int] = {}

        async def one() -> None:
            while time.monotonic() < deadline:
                try:
                    ws = await _connect(port, conversation_id, cookie)
                except (InvalidHandshake, TimeoutError, OSError):
                    counts["refused_at_open"] += 1
                    if reopen_after_s is None:
                        return
                    await asyncio.sleep(reopen_after_s)
                    continue
                counts["opened"] += 1
                reader = asyncio.create_task(_tally(ws, answers))
                try:
                    while time.monotonic() < deadline and not reader.done():
                        await ws.send('{"action": "cancel"}')
                        counts["frames_sent"] += 1
                        await asyncio.sleep(0)  # the other sockets send, the readers read
                except ConnectionClosed:
                    pass
                finally:
                    await ws.close()
                    await reader
                if ws.close_code == 4429:
                    counts["refused_at_open"] += 1
                elif ws.close_code is not None and time.monotonic() < deadline:
                    counts["closed_by_server"] += 1
                if reopen_after_s is None:
                    return
                await asyncio.sleep(reopen_after_s)

        await asyncio.gather(*(one() for _ in range(sockets)))
        return {**counts, "answers": answers}


async def _tally(ws: ClientConnection, answers: dict[str, int]) -> None:
    with contextlib.suppress(ConnectionClosed):
        async for raw in ws:
            code = json.loads(raw).get("code", "?")
            answers[code] = answers.get(code, 0) + 1


async def _cancel_sample(
    sender: Sock, canceller: Sock, pace_ms: float, rng: random.Random, limit_s: float = 5
) -> dict[str, Any]:
    started = sender.expect(is_type("message.started"))
    first = sender.expect(is_type("message.delta"))
    finished = sender.expect(is_type("message.finished"))
    sent_at = await sender.send(action="send", content="Count for me")
    _, started_event = await asyncio.wait_for(started, limit_s)
    first_at, _ = await asyncio.wait_for(first, limit_s)
    # A random moment between tokens, one to three tokens in.
    await asyncio.sleep(rng.uniform(pace_ms, 3 * pace_ms) / 1000)
    cancel_sent_at = await canceller.send(action="cancel")
    finished_at, finished_event = await asyncio.wait_for(finished, limit_s)
    return {
        "request_id": started_event["message"]["request_id"],
        "send_sent_at": sent_at,
        "first_delta_at": first_at,
        "cancel_sent_at": cancel_sent_at,
        "finished_at": finished_at,
        "message": finished_event["message"],
    }


def _worker_main(conn: Connection) -> None:
    asyncio.run(_serve(conn))


async def _serve(conn: Connection) -> None:
    client = Client()
    loop = asyncio.get_running_loop()
    while True:
        command, kwargs = await loop.run_in_executor(None, conn.recv)
        if command == "exit":
            await client.close_all()
            conn.send(("ok", None))
            return
        try:
            conn.send(("ok", await getattr(client, command)(**kwargs)))
        except Exception:
            conn.send(("error", traceback.format_exc()))


class Worker:
    """The orchestrator's handle on one client process."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child,), daemon=True)
        self.proc.start()

    def send(self, command: str, **kwargs: Any) -> None:
        self.conn.send((command, kwargs))

    def result(self, timeout: float = 600) -> Any:
        if not self.conn.poll(timeout):
            raise TimeoutError("a client worker did not answer in time")
        status, value = self.conn.recv()
        if status != "ok":
            raise RuntimeError(f"client worker failed:\n{value}")
        return value

    def call(self, command: str, timeout: float = 600, **kwargs: Any) -> Any:
        self.send(command, **kwargs)
        return self.result(timeout)

    def close(self) -> None:
        try:
            self.call("exit", timeout=30)
        except Exception:
            self.proc.kill()
        self.proc.join(timeout=10)


def call_all(
    workers: list[Worker], command: str, per_worker: list[dict[str, Any]], timeout: float = 600
) -> list[Any]:
    """Run a command on several workers at once and gather their answers."""
    for worker, kwargs in zip(workers, per_worker, strict=True):
        worker.send(command, **kwargs)
    return [worker.result(timeout) for worker in workers]
