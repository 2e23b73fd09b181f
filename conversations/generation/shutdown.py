"""A server that shuts down (SIGTERM, a restart) saves the replies it is writing before it exits.

Each generation is an asyncio task of its own, which no ASGI server knows about: daphne cancels
its connections' applications and stops the loop, and a reply's text since its last flush (up to
CHAT_FLUSH_INTERVAL_S of it) went with the process. Cancelled here, each generation saves what it
has, the text its tabs were shown and more, as interrupted (see runner.Generation._run), and
tells its tabs; the server waits for that, up to SAVE_TIMEOUT_S: daphne through a reactor
trigger (chatsite.daphne_shutdown), uvicorn through the SIGTERM handler (chatsite.asgi), which
lets uvicorn shut down once the replies are saved, and `manage.py runserver` (`make run`) at exit
(save_replies_at_exit).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import suppress

from conversations.generation import runner

logger = logging.getLogger("chatsite.generation")

# Long enough for a final save on a database that answers; a database that is away does not
# hold the process's exit for CHAT_FINAL_SAVE_RETRY_S.
SAVE_TIMEOUT_S = 10.0


async def generations_interrupt(*, timeout_s: float = SAVE_TIMEOUT_S) -> int:
    """Stop every generation of this process and wait until each has saved its reply; how many."""
    generations = runner.running_all()
    if not generations:
        return 0
    for generation in generations:
        generation.interrupt()
    waiting = {asyncio.ensure_future(generation.finished()) for generation in generations}
    _, unsaved = await asyncio.wait(waiting, timeout=timeout_s)
    for task in unsaved:
        task.cancel()
    logger.warning(
        "shutting down: %d reply(s) saved as interrupted, %d not saved in %ss",
        len(generations) - len(unsaved),
        len(unsaved),
        timeout_s,
    )
    return len(generations)


def save_replies_then(shut_down: Callable[[], None]) -> bool:
    """For a server's SIGTERM handler, which runs on the event loop's thread: save the replies
    being written, then call `shut_down` (the server's own handler), on the loop. False, and
    nothing done, when there is nothing to save or no loop to save it on."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return False
    if not runner.running_all():
        return False

    async def save_then_shut_down() -> None:
        try:
            await generations_interrupt()
        except asyncio.CancelledError:
            # The loop is ending under us (uvicorn raises SIGTERM again once it has shut down,
            # and asyncio.run cancels every task): the generations, cancelled with us, still
            # save their replies; the default action must wait for that.
            await generations_interrupt()
        shut_down()

    task = loop.create_task(save_then_shut_down(), name="save-replies-at-shutdown")
    _saving.add(task)
    task.add_done_callback(_saving.discard)
    return True


_saving: set[asyncio.Task[None]] = set()  # a strong reference, as for any task


def save_replies_at_exit() -> None:
    """For the interpreter's exit. runserver's autoreloader runs the server's loop on a thread of its own and
    ends the process from the main thread (a reload after a code change, Ctrl-C), with the loop
    still running the replies: they are saved on that loop first. Elsewhere the loop has stopped
    by now, and this does nothing."""
    generations = runner.running_all()
    if not generations:
        return
    loop = generations[0].loop
    if loop is None or not loop.is_running():
        return
    saving = asyncio.run_coroutine_threadsafe(generations_interrupt(), loop)
    with suppress(Exception):  # whatever happens, the process exits
        saving.result(timeout=SAVE_TIMEOUT_S + 1)
