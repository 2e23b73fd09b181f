"""Bad frames, double submits and per-user limits, through the conversation socket."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.db import connection

from conversations.generation.plans import ReplyPlan
from conversations.generation.replies import Send, Turn, reply_create
from conversations.models import Conversation, Message
from conversations.services.errors import DuplicateSend, ReplyInProgress
from tests.support.db import close_worker_connections
from tests.support.sockets import Socket, finished

pytestmark = [pytest.mark.django_db(transaction=True)]

PROMPT_LIMIT = 50


@pytest.fixture(autouse=True)
def quick_replies(settings: Any, scripted_engine: Any) -> None:
    settings.CHAT_MAX_PROMPT_CHARS = PROMPT_LIMIT
    scripted_engine.tokens = 5


@pytest.fixture(autouse=True)
async def close_db_connections() -> AsyncIterator[None]:
    yield
    await close_worker_connections()


@database_sync_to_async
def db_state() -> tuple[list[Any], list[Any]]:
    """Every column of every row a send can touch."""
    return (
        list(Message.objects.order_by("pk").values_list()),
        list(Conversation.objects.order_by("pk").values_list()),
    )


@database_sync_to_async
def replies_in(conversation: Conversation) -> list[Message]:
    return list(conversation.messages.filter(role=Message.Role.ASSISTANT))


async def send_raw(socket: Socket, raw: str | bytes) -> None:
    if isinstance(raw, bytes):
        await socket.communicator.send_to(bytes_data=raw)
    else:
        await socket.communicator.send_to(text_data=raw)


async def events_until_quiet(socket: Socket, first: Any = finished) -> list[dict[str, Any]]:
    """Events up to the first match of `first`, then whatever else arrives shortly after."""
    events = await socket.receive_until(first)
    while not await socket.communicator.receive_nothing(timeout=0.3):
        events.append(await socket.receive())
    return events


async def assert_streams(socket: Socket, content: str = "Still there?") -> None:
    await socket.send(action="send", content=content)
    events = await socket.receive_until(finished)
    assert events[0]["type"] == "message.started"
    assert events[0]["user_message"]["content"] == content
    assert events[-1]["message"]["status"] == "complete"


def is_error(event: dict[str, Any]) -> bool:
    return event["type"] == "error"


BAD_FRAMES: list[tuple[str, str | bytes]] = [
    ("bad_json", "this is not json"),
    ("bad_json", '{"action": "send", "content": "hi"'),
    ("bad_json", "[" * 30_000),
    ("bad_frame", b'{"action": "send", "content": "hi"}'),
    ("bad_frame", '["send", "hi"]'),
    ("bad_frame", '"send"'),
    ("too_large", json.dumps({"action": "send", "content": "hi", "pad": "x" * 70_000})),
    ("unknown_action", json.dumps({"action": "delete", "content": "hi"})),
    ("unknown_action", json.dumps({"content": "hi"})),
    ("bad_content", json.dumps({"action": "send", "content": 42})),
    ("bad_content", json.dumps({"action": "send"})),
    # PostgreSQL cannot store NUL; before the check this frame crashed the consumer there.
    ("bad_content", json.dumps({"action": "send", "content": "a\x00b"})),
    ("bad_content", json.dumps({"action": "send", "content": "\ud83d"})),
    ("empty", json.dumps({"action": "send", "content": " \n\t "})),
    ("too_long", json.dumps({"action": "send", "content": "x" * (PROMPT_LIMIT + 1)})),
    ("bad_idempotency_key", json.dumps({"action": "send", "content": "hi", "idempotency_key": 7})),
    (
        "bad_idempotency_key",
        json.dumps({"action": "send", "content": "hi", "idempotency_key": "k" * 65}),
    ),
    ("nothing_to_cancel", json.dumps({"action": "cancel"})),
    ("wrong_conversation", json.dumps({"action": "send", "content": "hi", "conversation": "x"})),
]


@pytest.mark.parametrize(
    ("code", "raw"), BAD_FRAMES, ids=[f"{c}-{i}" for i, (c, _) in enumerate(BAD_FRAMES)]
)
async def test_it_answers_a_bad_frame_with_an_error_and_changes_nothing(
    connect: Any, alice: Any, conversation: Any, code: str, raw: str | bytes
) -> None:
    socket, _, _ = await connect(alice, conversation.pk)
    before = await db_state()

    await send_raw(socket, raw)
    event = await socket.receive()

    assert event["type"] == "error"
    assert event["code"] == code
    assert event["message"]
    assert await socket.communicator.receive_nothing(timeout=0.2), "one error, nothing else"
    assert await db_state() == before
    await assert_streams(socket)


async def test_it_refuses_a_frame_for_another_users_conversation(
    connect: Any, alice: Any, charlie: Any, conversation: Any
) -> None:
    theirs = await database_sync_to_async(Conversation.objects.create)(owner=charlie, title="c")
    socket, _, _ = await connect(alice, conversation.pk)
    before = await db_state()

    await socket.send(action="send", content="Sneaky", conversation=str(theirs.pk))
    event = await socket.receive()

    assert (event["type"], event["code"]) == ("error", "wrong_conversation")
    assert await db_state() == before
    assert await replies_in(theirs) == []
    await assert_streams(socket)


async def test_the_browser_gets_the_error_as_a_fragment(
    connect: Any, alice: Any, conversation: Any
) -> None:
    socket, _, _ = await connect(alice, conversation.pk, json_protocol=False)
    await socket.communicator.receive_from()  # the saved state on connect
    await socket.send(action="send", content="   ", HEADERS={"HX-Request": "true"})
    fragment = await socket.communicator.receive_from()
    assert 'id="chat-errors"' in fragment and 'data-code="empty"' in fragment
    assert "Write a message before sending." in fragment


async def test_it_survives_a_burst_of_bad_frames(
    connect: Any, alice: Any, conversation: Any
) -> None:
    socket, _, _ = await connect(alice, conversation.pk)
    before = await db_state()
    for _, raw in BAD_FRAMES:
        await send_raw(socket, raw)
    codes = [(await socket.receive())["code"] for _ in BAD_FRAMES]
    assert codes == [code for code, _ in BAD_FRAMES], "one answer per frame, in order"
    assert await db_state() == before
    await assert_streams(socket)


# Double submit.


async def test_the_same_idempotency_key_twice_starts_one_reply(
    connect: Any, alice: Any, conversation: Any
) -> None:
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Hello", idempotency_key="key-1")
    events = await socket.receive_until(finished)
    assert events[0]["type"] == "message.started"
    before = await db_state()

    await socket.send(action="send", content="Hello", idempotency_key="key-1")
    event = await socket.receive()

    assert (event["type"], event["code"]) == ("error", "duplicate")
    assert await socket.communicator.receive_nothing(timeout=0.2)
    assert await db_state() == before
    assert len(await replies_in(conversation)) == 1


async def test_a_double_click_while_the_reply_streams_is_a_duplicate(
    connect: Any, alice: Any, conversation: Any, scripted_engine: Any
) -> None:
    """A retry must say "duplicate", not "a reply is in progress": that reply is the retry's own."""
    scripted_engine.tokens = 30
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Hello", idempotency_key="click")
    await socket.send(action="send", content="Hello", idempotency_key="click")

    events = await events_until_quiet(socket)

    assert [e["type"] for e in events].count("message.started") == 1
    assert [e["code"] for e in events if is_error(e)] == ["duplicate"]
    assert len(await replies_in(conversation)) == 1


async def test_a_new_key_after_the_reply_starts_a_new_reply(
    connect: Any, alice: Any, conversation: Any
) -> None:
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="One", idempotency_key="key-1")
    await socket.receive_until(finished)
    await socket.send(action="send", content="Two", idempotency_key="key-2")
    events = await socket.receive_until(finished)
    assert events[0]["user_message"]["content"] == "Two"
    assert len(await replies_in(conversation)) == 2


async def test_two_tabs_sending_the_same_key_at_once_start_one_reply(
    connect: Any, alice: Any, conversation: Any
) -> None:
    first, _, _ = await connect(alice, conversation.pk)
    second, _, _ = await connect(alice, conversation.pk)

    await asyncio.gather(
        first.send(action="send", content="Hello", idempotency_key="same"),
        second.send(action="send", content="Hello", idempotency_key="same"),
    )
    first_events, second_events = await asyncio.gather(
        events_until_quiet(first), events_until_quiet(second)
    )

    for events in (first_events, second_events):
        # Both tabs watch the one reply that started.
        assert [e["type"] for e in events].count("message.started") == 1
        assert events[-1]["type"] in ("message.finished", "error")
    errors = [e["code"] for e in first_events + second_events if is_error(e)]
    assert errors == ["duplicate"], "exactly one of the two sends was refused"
    messages = await database_sync_to_async(list)(conversation.messages.all())
    assert [m.role for m in messages] == ["user", "assistant"]
    assert messages[0].idempotency_key == "same"
    assert messages[1].status == Message.Status.COMPLETE


def race_reply_create(sends: list[tuple[Conversation, str]]) -> list[Any]:
    """Call reply_create from one thread per (conversation, key), released together, as two
    processes would; what each got back."""
    barrier = threading.Barrier(len(sends))
    results: list[Any] = [None] * len(sends)

    def attempt(index: int) -> None:
        conversation, key = sends[index]
        try:
            barrier.wait(timeout=10)
            results[index] = reply_create(
                Send(conversation=conversation, turn=Turn(content="Hello"), idempotency_key=key)
            )
        except Exception as exc:
            results[index] = exc
        finally:
            connection.close()  # each thread has its own connection

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(len(sends))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return results


needs_postgres = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="SQLite lets one writer in at a time, so two sends never race at the unique index; "
    "set DATABASE_URL to a PostgreSQL database to run this",
)


@needs_postgres
def test_two_processes_creating_the_same_key_at_once_create_one_reply(alice: Any) -> None:
    for _ in range(10):  # several rounds: the threads must really meet at the index
        # Earlier rounds' replies must not count against the active-replies limit.
        Message.objects.filter(conversation__owner=alice).update(status=Message.Status.COMPLETE)
        conversation = Conversation.objects.create(owner=alice)
        results = race_reply_create([(conversation, "same"), (conversation, "same")])

        assert sorted(type(r).__name__ for r in results) == ["DuplicateSend", "ReplyPlan"]
        assert conversation.messages.filter(role=Message.Role.USER).count() == 1
        assert conversation.messages.filter(role=Message.Role.ASSISTANT).count() == 1


@needs_postgres
def test_two_processes_sending_different_keys_at_once_start_one_reply(alice: Any) -> None:
    for _ in range(10):
        # Earlier rounds' replies must not count against the active-replies limit.
        Message.objects.filter(conversation__owner=alice).update(status=Message.Status.COMPLETE)
        conversation = Conversation.objects.create(owner=alice)
        results = race_reply_create([(conversation, "one"), (conversation, "two")])

        assert sum(isinstance(r, ReplyPlan) for r in results) == 1
        assert sum(isinstance(r, ReplyInProgress) for r in results) == 1
        # The refused send's user message was rolled back with it.
        assert conversation.messages.count() == 2


@needs_postgres
def test_sends_racing_in_two_processes_never_overshoot_the_active_limit(
    alice: Any, settings: Any
) -> None:
    settings.CHAT_MAX_ACTIVE_PER_USER = 1
    for _ in range(10):
        Message.objects.filter(conversation__owner=alice).update(status=Message.Status.COMPLETE)
        results = race_reply_create(
            [
                (Conversation.objects.create(owner=alice), ""),
                (Conversation.objects.create(owner=alice), ""),
            ]
        )

        assert sorted(type(r).__name__ for r in results) == ["ReplyPlan", "TooManyActive"]
        assert Message.objects.filter(conversation__owner=alice).active().count() == 1


def test_reply_create_refuses_a_repeated_key(alice: Any) -> None:
    conversation = Conversation.objects.create(owner=alice)
    send = Send(conversation=conversation, turn=Turn(content="Hello"), idempotency_key="k")
    reply_create(send)
    Message.objects.filter(conversation=conversation).update(status=Message.Status.COMPLETE)
    with pytest.raises(DuplicateSend):
        reply_create(send)
    assert conversation.messages.count() == 2


# Per-user limits.


async def test_over_the_active_limit_a_send_starts_nothing(
    connect: Any, alice: Any, conversation: Any, settings: Any, scripted_engine: Any
) -> None:
    settings.CHAT_MAX_ACTIVE_PER_USER = 1
    scripted_engine.tokens = 1000
    other = await database_sync_to_async(Conversation.objects.create)(owner=alice)
    busy, _, _ = await connect(alice, conversation.pk)
    idle, _, _ = await connect(alice, other.pk)
    await busy.send(action="send", content="Count forever")
    await busy.receive_until(lambda e: e["type"] == "message.delta")
    before = await db_state()

    await idle.send(action="send", content="And this too")
    event = await idle.receive()

    assert (event["type"], event["code"]) == ("error", "too_many_active")
    assert "already have 1" in event["message"]
    assert await db_state() == before
    # Once the running reply is stopped, the limit lets the next one through.
    await busy.send(action="cancel")
    await busy.receive_until(finished)
    scripted_engine.tokens = 5
    await assert_streams(idle)


async def test_over_the_send_rate_a_send_starts_nothing(
    connect: Any, users: Any, alice: Any, conversation: Any, settings: Any
) -> None:
    settings.CHAT_SENDS_PER_MINUTE = 2
    socket, _, _ = await connect(alice, conversation.pk)
    await assert_streams(socket, "one")
    await assert_streams(socket, "two")
    before = await db_state()

    await socket.send(action="send", content="three")
    event = await socket.receive()

    assert (event["type"], event["code"]) == ("error", "rate_limited")
    assert "2 messages a minute" in event["message"]
    assert await db_state() == before
    # The limit is alice's alone: bob still sends.
    bobs = await database_sync_to_async(Conversation.objects.create)(owner=users["bob"])
    bob_socket, _, _ = await connect(users["bob"], bobs.pk)
    await assert_streams(bob_socket)


async def test_refused_sends_do_not_count_towards_the_rate(
    connect: Any, alice: Any, conversation: Any, settings: Any
) -> None:
    settings.CHAT_SENDS_PER_MINUTE = 1
    socket, _, _ = await connect(alice, conversation.pk)
    for raw in ('{"action": "send", "content": ""}', "nonsense", '{"action": "cancel"}'):
        await send_raw(socket, raw)
        assert (await socket.receive())["type"] == "error"
    await assert_streams(socket)


async def test_a_stranger_cannot_send_at_all(connect: Any, charlie: Any, conversation: Any) -> None:
    socket, _, _ = await connect(charlie, conversation.pk)
    output = await socket.communicator.receive_output(timeout=2)
    assert output == {"type": "websocket.close", "code": 4403}
    # A frame can still arrive before the client sees the close; it is dropped, crashing nothing.
    before = await db_state()
    await socket.send(action="send", content="Let me in")
    assert await socket.communicator.receive_nothing(timeout=0.3)
    assert not socket.communicator.future.done(), "the refused consumer crashed"
    assert await db_state() == before


async def test_a_retry_over_the_limit_is_still_a_duplicate(
    connect: Any, alice: Any, conversation: Any, settings: Any
) -> None:
    """The retry's message was already sent: it must hear "duplicate", not "try again later"."""
    settings.CHAT_SENDS_PER_MINUTE = 1
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Hello", idempotency_key="retry")
    await socket.receive_until(finished)
    before = await db_state()

    await socket.send(action="send", content="Hello", idempotency_key="retry")
    event = await socket.receive()

    assert (event["type"], event["code"]) == ("error", "duplicate")
    assert await db_state() == before
