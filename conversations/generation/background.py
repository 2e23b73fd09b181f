"""Tasks that run on their own, nobody awaiting them.

asyncio keeps only a weak reference to a task, so one that nothing holds may be collected before
it ends: each is held in a set of its owner's until it is done.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine
from typing import Any


def spawn(
    work: Coroutine[Any, Any, Any],
    *,
    keep: set[asyncio.Task[Any]],
    name: str | None = None,
    context: contextvars.Context | None = None,
) -> asyncio.Task[Any]:
    """Start `work` as a task held in `keep` until it ends."""
    task = asyncio.create_task(work, name=name, context=context)
    keep.add(task)
    task.add_done_callback(keep.discard)
    return task
