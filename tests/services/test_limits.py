"""Per-user rates, counted where deleting conversations cannot reset them."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.conf import settings as django_settings

from conversations.models import Conversation, Message
from conversations.services import ratelimits
from conversations.services.conversations import conversation_create, conversation_delete
from tests.support.servers import ROOT
from tests.support.sockets import Socket, finished

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def quick_replies(scripted_engine: Any) -> None:
    scripted_engine.tokens = 3


async def send_and_finish(socket: Socket, content: str) -> None:
    await socket.send(action="send", content=content)
    events = await socket.receive_until(finished)
    assert events[-1]["message"]["status"] == "complete"


async def test_deleting_conversations_does_not_reset_the_send_rate(
    connect: Any, alice: Any, conversation: Conversation, settings: Any
) -> None:
    settings.CHAT_SENDS_PER_MINUTE = 2
    socket, _, _ = await connect(alice, conversation.pk)
    await send_and_finish(socket, "one")
    await send_and_finish(socket, "two")

    # Deleting the conversation deletes its messages: a count of rows would start again at 0.
    await database_sync_to_async(conversation_delete)(conversation=conversation)
    fresh = await database_sync_to_async(conversation_create)(owner=alice)
    socket, _, _ = await connect(alice, fresh.pk)
    await socket.send(action="send", content="three")
    event = await socket.receive()

    assert (event["type"], event.get("code")) == ("error", "rate_limited")
    assert "2 messages a minute" in event["message"]
    assert not await database_sync_to_async(Message.objects.filter(conversation=fresh).exists)()


async def test_a_send_refused_as_in_progress_does_not_count(
    connect: Any, alice: Any, conversation: Conversation, settings: Any, stepped_engine: Any
) -> None:
    settings.CHAT_SENDS_PER_MINUTE = 2
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="one")
    await socket.receive_until(lambda e: e["type"] == "message.started")

    await socket.send(action="send", content="while the first is written")
    events = await socket.receive_until(lambda e: e["type"] == "error")

    assert events[-1]["code"] == "reply_in_progress"
    assert ratelimits.usage("send", alice.pk).count == 1
    (await stepped_engine.next_stream()).end()  # the first reply ends before the test does
    await socket.receive_until(lambda e: e["type"] == "message.finished")


def test_the_send_count_is_kept_per_user(alice: Any, charlie: Any) -> None:
    ratelimits.hit("send", alice.pk)
    assert ratelimits.usage("send", alice.pk).count == 1
    assert ratelimits.usage("send", charlie.pk).count == 0


COUNT_IN_ANOTHER_PROCESS = """
import sys

import django

django.setup()
from django.conf import settings

settings.CACHES["default"]["KEY_PREFIX"] = sys.argv[1]
from conversations.services import ratelimits

for _ in range(int(sys.argv[2])):
    ratelimits.hit("cross-process", 1)
"""


@pytest.mark.skipif(
    not django_settings.REDIS_URL, reason="needs REDIS_URL (a cache processes share)"
)
def test_processes_count_in_one_place(settings: Any) -> None:
    """Four processes count at once; this one sees every count, none lost to a race."""
    prefix = settings.CACHES["default"]["KEY_PREFIX"]
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "chatsite.settings"}
    command = [sys.executable, "-c", COUNT_IN_ANOTHER_PROCESS, prefix, "25"]
    processes = [subprocess.Popen(command, cwd=ROOT, env=env) for _ in range(4)]
    assert [p.wait(timeout=60) for p in processes] == [0, 0, 0, 0]

    assert ratelimits.usage("cross-process", 1).count == 100
    assert ratelimits.hit("cross-process", 1).count == 101
