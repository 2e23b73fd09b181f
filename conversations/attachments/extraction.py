"""A file's text, for the prompt: a PDF's or a DOCX's read by `worker` in a child process, within
CHAT_ATTACHMENT_EXTRACT_SECONDS of wall time (and as much CPU time) and
CHAT_ATTACHMENT_EXTRACT_MEMORY_MB of memory, so that no
file can stall or exhaust the server; UTF-8 text decoded here. Async (a subprocess the event loop
waits on) and sync (for a view in a thread) forms, which make the same command and read the same
answer. Raises Unreadable, whose message says why, for a file that cannot be read within them.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import weakref

from django.conf import settings

from conversations.attachments.kinds import Kind

WORKER_KINDS = {Kind.PDF: "pdf", Kind.DOCX: "docx"}


class Unreadable(Exception):
    """The file's text cannot be read; the message says why, for the person who sent it."""


async def extracted_text(data: bytes, kind: Kind) -> str:
    """The file's text; decoding and parsing the reader's answer (megabytes, maybe) happen on a
    thread, and at most CHAT_ATTACHMENT_READERS readers run at once in this process (each may
    take its memory limit): more wait their turn."""
    if kind not in WORKER_KINDS:
        return await asyncio.to_thread(_decoded, data, kind)
    async with _readers():
        child = await asyncio.create_subprocess_exec(
            *_command(kind),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            out, _ = await asyncio.wait_for(child.communicate(data), _seconds())
        except TimeoutError:
            child.kill()
            await child.wait()
            raise Unreadable(_too_slow()) from None
    return await asyncio.to_thread(_answer, kind, child.returncode, out)


_semaphores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
    weakref.WeakKeyDictionary()
)


def _readers() -> asyncio.Semaphore:
    """This event loop's semaphore of readers (a semaphore belongs to the loop it first ran on)."""
    loop = asyncio.get_running_loop()
    if loop not in _semaphores:
        _semaphores[loop] = asyncio.Semaphore(settings.CHAT_ATTACHMENT_READERS)
    return _semaphores[loop]


def extracted_text_sync(data: bytes, kind: Kind) -> str:
    if kind not in WORKER_KINDS:
        return _decoded(data, kind)
    try:
        done = subprocess.run(
            _command(kind),
            input=data,
            capture_output=True,
            timeout=_seconds(),
            start_new_session=True,
            check=False,
        )
    except subprocess.TimeoutExpired:  # run() has killed it
        raise Unreadable(_too_slow()) from None
    return _answer(kind, done.returncode, done.stdout)


def _command(kind: Kind) -> list[str]:
    # -E and -s: no PYTHON* variables and no user site-packages change what the child runs.
    worker = "conversations.attachments.worker"
    limits = [str(_memory_mb()), str(_seconds())]
    return [sys.executable, "-E", "-s", "-m", worker, WORKER_KINDS[kind], *limits]


def _decoded(data: bytes, kind: Kind) -> str:
    if kind is not Kind.TEXT:
        raise Unreadable("An image has no text to read.")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise Unreadable("The file is not UTF-8 text.") from None


def _seconds() -> int:
    return int(settings.CHAT_ATTACHMENT_EXTRACT_SECONDS)


def _memory_mb() -> int:
    return int(settings.CHAT_ATTACHMENT_EXTRACT_MEMORY_MB)


def _too_slow() -> str:
    return f"The file took longer than {_seconds()} s to read."


def _answer(kind: Kind, returncode: int | None, out: bytes) -> str:
    label = "PDF" if kind is Kind.PDF else "DOCX"
    try:
        answer = json.loads(out)
    except ValueError:
        if returncode is not None and -returncode in (signal.SIGXCPU, signal.SIGKILL):
            raise Unreadable(_too_slow()) from None  # past its CPU time
        raise Unreadable(f"The {label} could not be read: its reader stopped.") from None
    if "text" in answer:
        return str(answer["text"])
    detail = answer.get("detail") or ""
    if answer["error"] == "memory":
        raise Unreadable(f"The {label} needs more than {_memory_mb()} MB to read.")
    if answer["error"] == "too_large":
        raise Unreadable(f"The {label} is larger inside than chatsite reads: {detail}.")
    raise Unreadable(f"The {label} could not be read: {detail or 'it is damaged'}.")
