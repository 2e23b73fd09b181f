"""Reading replies back in tests: the row, waiting for a state, the scripted engine's text."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from channels.db import database_sync_to_async

from conversations.engines.scripted import scripted_token
from conversations.models import Message


def full_reply(tokens: int) -> str:
    """The text of a complete scripted reply of `tokens` tokens."""
    return "".join(scripted_token(i) for i in range(tokens))


def latest_reply(conversation: Any) -> Message | None:
    return conversation.messages.filter(role=Message.Role.ASSISTANT).last()  # type: ignore[no-any-return]


reply_of = database_sync_to_async(latest_reply)


def only_reply(conversation: Any) -> Message:
    """The conversation's one reply; raises if it has none or several."""
    return conversation.messages.get(role=Message.Role.ASSISTANT)  # type: ignore[no-any-return]


only_reply_of = database_sync_to_async(only_reply)


async def wait_for_reply(
    conversation: Any, predicate: Callable[[Message], bool], timeout: float = 10
) -> Message:
    """Poll the conversation's newest reply until it matches (the database has no events)."""
    async with asyncio.timeout(timeout):
        while True:
            row = await reply_of(conversation)
            if row is not None and predicate(row):
                return row
            await asyncio.sleep(0.02)


async def wait_for_status(conversation: Any, *statuses: str, timeout: float = 10) -> Message:
    return await wait_for_reply(conversation, lambda row: row.status in statuses, timeout)


async def wait_until_settled(conversation: Any, timeout: float = 30) -> Message:
    return await wait_for_reply(conversation, lambda row: not row.is_active, timeout)


async def generations_finished(timeout: float = 10) -> None:
    """Wait until no generation runs in this process: one left running when a test's event loop
    closes can hang the loop's teardown (its final save waits on the database thread)."""
    from conversations.generation import runner

    deadline = asyncio.get_running_loop().time() + timeout
    while runner._running and asyncio.get_running_loop().time() < deadline:  # noqa: ASYNC110 - polls the registry
        await asyncio.sleep(0.02)
