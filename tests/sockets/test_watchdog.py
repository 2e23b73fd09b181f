"""A tab's Watchdog looks up a reply it has heard nothing about: finished unheard, it is shown
finished; its process dead, it is settled and shown so; still running, it is asked for again;
deleted, it is no longer followed; the database away, it is looked up later."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.db import DatabaseError
from django.utils import timezone

from conversations.events.broadcast import generation_group
from conversations.events.payloads import MessagePayload
from conversations.generation import recovery
from conversations.models import Conversation, Message
from conversations.sockets.tabs import TabState
from conversations.sockets.watchdog import Watchdog
from tests.support.db import close_worker_connections

pytestmark = [pytest.mark.django_db(transaction=True)]

BOUND_S = 5
# Heard nothing for this long: silent. The watchdog looks twice as often.
QUIET_S = 0.02


class Tab(TabState):
    """A TabState that says when a reply stops being followed."""

    def __init__(self) -> None:
        super().__init__(quiet_s=QUIET_S)
        self.settled: asyncio.Queue[int] = asyncio.Queue()

    def finished(self, message_id: int) -> bool:
        self.settled.put_nowait(message_id)
        return super().finished(message_id)


class Shown:
    """The consumer's side: the settled replies the watchdog hands it to show."""

    def __init__(self, tab: Tab) -> None:
        self.tab = tab
        self.finished: asyncio.Queue[MessagePayload] = asyncio.Queue()

    async def finish(self, message_id: int, saved: MessagePayload) -> None:
        self.tab.finished(message_id)
        self.finished.put_nowait(saved)


@pytest.fixture
async def watching(conversation: Conversation) -> AsyncIterator[tuple[Watchdog, Tab, Shown]]:
    tab = Tab()
    shown = Shown(tab)
    watchdog = Watchdog(
        conversation=conversation, tab=tab, reply_channel="a-tab", finish=shown.finish
    )
    yield watchdog, tab, shown
    watchdog.stop()
    await close_worker_connections()


def reply(conversation: Conversation, **fields: Any) -> Message:
    return Message.objects.create(conversation=conversation, role=Message.Role.ASSISTANT, **fields)


def follow(watchdog: Watchdog, tab: Tab, message_id: int) -> None:
    tab.started(message_id, time.monotonic())
    watchdog.watch()


async def test_a_reply_that_finished_unheard_is_shown_finished(
    conversation: Conversation, watching: tuple[Watchdog, Tab, Shown]
) -> None:
    watchdog, tab, shown = watching
    row = await database_sync_to_async(reply)(
        conversation, content="all of it", status=Message.Status.COMPLETE
    )
    follow(watchdog, tab, row.pk)
    saved = await asyncio.wait_for(shown.finished.get(), BOUND_S)
    assert (saved["id"], saved["content"], saved["status"]) == (row.pk, "all of it", "complete")
    assert not tab.following


async def test_a_reply_whose_process_died_is_settled_and_shown_so(
    conversation: Conversation, watching: tuple[Watchdog, Tab, Shown]
) -> None:
    watchdog, tab, shown = watching
    an_hour_ago = timezone.now() - timedelta(hours=1)
    row = await database_sync_to_async(reply)(
        conversation, content="half", status=Message.Status.STREAMING, heartbeat_at=an_hour_ago
    )
    follow(watchdog, tab, row.pk)
    saved = await asyncio.wait_for(shown.finished.get(), BOUND_S)
    assert (saved["id"], saved["status"]) == (row.pk, "interrupted")
    await row.arefresh_from_db()
    assert row.status == Message.Status.INTERRUPTED


async def test_a_reply_still_running_elsewhere_is_asked_for_again(
    conversation: Conversation, watching: tuple[Watchdog, Tab, Shown]
) -> None:
    watchdog, tab, shown = watching
    layer = get_channel_layer()
    generation = await layer.new_channel()  # what the reply's process hears
    await layer.group_add(generation_group(conversation.group_name), generation)
    row = await database_sync_to_async(reply)(
        conversation, status=Message.Status.STREAMING, heartbeat_at=timezone.now()
    )
    follow(watchdog, tab, row.pk)
    asked = await asyncio.wait_for(layer.receive(generation), BOUND_S)
    assert (asked["type"], asked["message_id"], asked["reply_channel"]) == (
        "chat.sync",
        row.pk,
        "a-tab",
    )
    assert tab.following and shown.finished.empty()
    await layer.group_discard(generation_group(conversation.group_name), generation)


async def test_a_reply_deleted_meanwhile_is_no_longer_followed(
    watching: tuple[Watchdog, Tab, Shown],
) -> None:
    watchdog, tab, shown = watching
    follow(watchdog, tab, 2**40)  # no such reply (any more)
    assert await asyncio.wait_for(tab.settled.get(), BOUND_S) == 2**40
    assert not tab.following and shown.finished.empty()


async def test_a_reply_is_looked_up_again_when_the_database_was_away(
    conversation: Conversation,
    watching: tuple[Watchdog, Tab, Shown],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    watchdog, tab, shown = watching
    looked_up = recovery.reply_state
    tries = []

    def away_once(**kwargs: Any) -> recovery.ReplyState:
        tries.append(kwargs["message_id"])
        if len(tries) == 1:
            raise DatabaseError("the database is restarting")
        return looked_up(**kwargs)

    monkeypatch.setattr(recovery, "reply_state", away_once)
    row = await database_sync_to_async(reply)(
        conversation, content="done", status=Message.Status.COMPLETE
    )
    follow(watchdog, tab, row.pk)
    saved = await asyncio.wait_for(shown.finished.get(), BOUND_S)
    assert saved["content"] == "done"
    assert tries == [row.pk, row.pk]
