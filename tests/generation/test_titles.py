"""After a conversation's first reply, the title model writes the title: after the reply, never in
its way (a reply starting on its engine stops it), never over a title its owner gave, and the
first words stay if it fails or there is no title model."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.db import database_sync_to_async

from conversations.generation import titles
from conversations.models import Conversation
from conversations.services.conversations import conversation_delete
from tests.support.replies import full_reply
from tests.support.sockets import finished

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def titles_on(settings: Any, scripted_engine: Any) -> Any:
    settings.CHAT_AUTO_TITLES = True
    settings.CHAT_TITLE_MODEL = "default"  # the scripted engine's one model
    scripted_engine.tokens = 5
    return scripted_engine


def title_requests(engine: Any) -> list[Any]:
    return [r for r in engine.records.values() if r.messages[0].content == titles.INSTRUCTION]


async def title_of(conversation: Conversation) -> Conversation:
    await database_sync_to_async(conversation.refresh_from_db)()
    return conversation


async def test_the_model_titles_the_conversation_after_its_first_reply(
    connect: Any, alice: Any, conversation: Any, scripted_engine: Any
) -> None:
    conversation.title = ""
    await database_sync_to_async(conversation.save)()
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="How do sockets work in Python?")
    events = await socket.receive_until(finished)
    assert events[-1]["message"]["content"] == full_reply(5), "the reply came whole first"
    assert (await title_of(conversation)).title in {
        "How do sockets work in Python?",  # the first words, until the model's title lands
        full_reply(5).strip(),
    }

    titled = await socket.receive_until(lambda e: e["type"] == "conversation.title")
    assert titled[-1]["title"] == full_reply(5).strip()  # what the scripted model wrote
    assert (await title_of(conversation)).title == full_reply(5).strip()
    (request,) = title_requests(scripted_engine)
    assert "How do sockets work in Python?" in request.messages[1].content
    assert full_reply(5) in request.messages[1].content
    assert request.params.max_tokens == titles.TITLE_TOKENS

    # Only the first reply: the next one asks for no title.
    await socket.send(action="send", content="And sockets in Go?")
    await socket.receive_until(finished)
    assert await socket.nothing_within(0.3)
    assert len(title_requests(scripted_engine)) == 1


async def test_a_reply_starting_on_the_engine_stops_the_title_request_first(
    connect: Any, alice: Any, scripted_engine: Any
) -> None:
    conversation = await database_sync_to_async(Conversation.objects.create)(owner=alice)
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="**Plan** a weekend in `Lisbon`")
    await socket.receive_until(finished)
    scripted_engine.tokens = titles.TITLE_TOKENS
    scripted_engine.delay_s = 0.2  # a title request that would hold the engine for seconds
    while not any(r.emitted for r in title_requests(scripted_engine)):  # noqa: ASYNC110 - its progress
        await asyncio.sleep(0.01)

    # The title request goes on at its pace (16 tokens: about 3 s); the follow-up is short.
    # Its delay is left alone: lowered, the title could end before the follow-up is asked.
    scripted_engine.tokens = 2
    await socket.send(action="send", content="And in Porto?")
    follow_up = await socket.receive_until(finished)

    (title_request,) = title_requests(scripted_engine)
    reply = scripted_engine.records[follow_up[-1]["message"]["request_id"]]
    assert title_request.stop_requested_at is not None, "the title gave way"
    assert title_request.stop_requested_at <= reply.requested_at, "before the reply was asked"
    for task in list(titles._writing):
        await task
    assert (await title_of(conversation)).title == "Plan a weekend in Lisbon", "first words"


async def test_without_a_title_model_the_title_is_the_first_words_without_markdown(
    connect: Any, alice: Any, scripted_engine: Any, settings: Any
) -> None:
    settings.CHAT_TITLE_MODEL = ""  # the default for the embedded engine
    conversation = await database_sync_to_async(Conversation.objects.create)(owner=alice)
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="# Sort a list\n\nIn **Python**, [how](http://x.org)?")
    await socket.receive_until(finished)
    assert not titles._writing and title_requests(scripted_engine) == []
    assert (await title_of(conversation)).title == "Sort a list In Python, how?"


async def test_every_tab_shows_the_new_title(connect: Any, alice: Any, conversation: Any) -> None:
    page, _, _ = await connect(alice, conversation.pk, json_protocol=False)
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Hello")
    await socket.receive_until(lambda e: e["type"] == "conversation.title")
    fragment = ""
    while 'id="conversation-heading"' not in fragment or "alpha0" not in fragment:
        fragment = await page.communicator.receive_from(timeout=5)
    assert 'hx-swap-oob="true"' in fragment and full_reply(5).strip() in fragment


async def test_a_title_its_owner_gave_is_kept(
    connect: Any, alice: Any, conversation: Any, scripted_engine: Any
) -> None:
    await database_sync_to_async(
        lambda: Conversation.objects.filter(pk=conversation.pk).update(
            title="My own title", title_is_custom=True
        )
    )()
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Hello")
    await socket.receive_until(finished)
    for task in list(titles._writing):
        await task
    assert (await title_of(conversation)).title == "My own title"
    assert await socket.nothing_within(0.3), "no title event"


async def test_a_failing_title_request_leaves_the_first_words(
    connect: Any, alice: Any, scripted_engine: Any
) -> None:
    scripted_engine.fail_on = titles.INSTRUCTION
    conversation = await database_sync_to_async(Conversation.objects.create)(owner=alice)
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Plan a weekend in Lisbon")
    events = await socket.receive_until(finished)
    assert events[-1]["message"]["status"] == "complete", "the reply is not touched"
    for task in list(titles._writing):
        await task
    assert (await title_of(conversation)).title == "Plan a weekend in Lisbon"
    assert len(title_requests(scripted_engine)) == 1


async def test_a_deleted_conversation_gets_no_title(alice: Any, scripted_engine: Any) -> None:
    conversation = await database_sync_to_async(Conversation.objects.create)(owner=alice)
    conversation_id, group = conversation.id, conversation.group_name
    await database_sync_to_async(conversation.delete)()
    saved = await titles.write_title(
        conversation_id, group, _spec(), "Hello", "Hi there", owner_id=alice.pk
    )
    assert saved is None
    assert not await database_sync_to_async(
        Conversation.objects.filter(pk=conversation_id).exists
    )()


async def test_deleting_the_conversation_stops_its_title_request_in_the_engine(
    alice: Any, scripted_engine: Any
) -> None:
    scripted_engine.tokens = titles.TITLE_TOKENS
    scripted_engine.delay_s = 0.2  # a title request that would take seconds
    conversation = await database_sync_to_async(Conversation.objects.create)(owner=alice)
    writing = asyncio.create_task(
        titles.write_title(
            conversation.id, conversation.group_name, _spec(), "Hello", "Hi", owner_id=alice.pk
        )
    )
    while not any(r.emitted for r in title_requests(scripted_engine)):  # noqa: ASYNC110 - its progress
        await asyncio.sleep(0.01)

    await database_sync_to_async(conversation_delete)(conversation=conversation)

    assert await asyncio.wait_for(writing, 5) is None
    (request,) = title_requests(scripted_engine)
    assert request.stop_requested_at is not None, "the engine was told to stop"
    assert request.finished and request.emitted < titles.TITLE_TOKENS


def _spec() -> Any:
    from conversations.engines.specs import declared_models

    return declared_models()[0]


@pytest.mark.parametrize(
    ("answer", "title"),
    [
        ('"Sockets in Python."', "Sockets in Python"),
        ("Title: Weekend in Lisbon\nMore text", "Weekend in Lisbon"),
        ("\n\n  **Binary search**  ", "Binary search"),
        ("x" * 200, "x" * 79 + "…"),
        ("   ", ""),
        ("## Sorting a `list` in [Python](https://python.org)", "Sorting a list in Python"),
        ("> “Weekend in Lisbon”", "Weekend in Lisbon"),
        (("word " * 30).strip(), ("word " * 16).strip() + "…"),  # 80 characters
    ],
)
def test_the_answer_is_cleaned_into_a_title(answer: str, title: str) -> None:
    assert titles.clean(answer) == title
