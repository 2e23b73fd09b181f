"""The lifecycle bugs found when the generation was rebuilt, each pinned by what a user sees."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.exceptions import ChannelFull
from channels.layers import channel_layers, get_channel_layer
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from conversations.engines import get_engine, reset_engines
from conversations.engines.base import EngineError, FinishReason
from conversations.engines.llamacpp import LlamaCppEngine
from conversations.events import broadcast
from conversations.events.protocol import Sync
from conversations.generation import rows
from conversations.models import Conversation, Message
from tests.support.replies import reply_of, wait_for_reply
from tests.support.sockets import finished, is_delta, started, streamed_text

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.mark.model
async def test_a_reply_queued_behind_the_embedded_model_waits_instead_of_stalling(
    connect: Any, alice: Any, conversation: Conversation, settings: Any
) -> None:
    """Bug a: the stall timeout cancelled the queued job before the "still queued" check."""
    settings.CHAT_ENGINE = "llamacpp"
    settings.CHAT_STALL_TIMEOUT_S = 0.5
    settings.CHAT_MAX_TOKENS = 8
    reset_engines()
    engine = get_engine("llamacpp")
    assert isinstance(engine, LlamaCppEngine)
    await asyncio.to_thread(engine.model_instance)
    release = threading.Event()
    engine.executor.submit(release.wait)  # another reply holds the model
    try:
        socket, _, _ = await connect(alice, conversation.pk)
        await socket.send(action="send", content="Say hello.")
        await socket.receive_until(started)
        # Queued for twice the stall timeout (the stall timer reads the wall clock): no failure.
        assert await socket.nothing_within(1.0)
        assert (await reply_of(conversation)).status == Message.Status.PENDING
    finally:
        release.set()
    # Stopped at once, so how fast the model is on a busy machine does not matter here.
    await socket.send(action="cancel")
    events = await socket.receive_until(finished, timeout=60)
    reply = events[-1]["message"]
    assert reply["status"] in ("cancelled", "complete"), reply["error"]


def test_start_up_refuses_an_unknown_engine_naming_the_variable(settings: Any) -> None:
    """Bug b: a typo in CHAT_ENGINE is a system check error, not a dead socket later."""
    settings.CHAT_ENGINE = "typo"
    with pytest.raises(SystemCheckError, match="CHAT_ENGINE"):
        call_command("check")


@pytest.mark.parametrize(
    "broken",
    [
        {"CHAT_ENGINE": "typo"},
        {"CHAT_ENGINE": "llamacpp", "CHAT_MODEL_PATH": "/nowhere/model.gguf"},
        {"CHAT_ENGINE": "vllm", "CHAT_VLLM_MODEL": "some/model"},
    ],
    ids=["unknown", "missing-gguf", "vllm-not-installed"],
)
async def test_a_broken_engine_refuses_the_send_and_keeps_the_socket(
    connect: Any, alice: Any, conversation: Conversation, settings: Any, broken: dict[str, str]
) -> None:
    """Bug b: the send is answered with an error event; nothing is saved; the socket lives on."""
    if broken["CHAT_ENGINE"] == "vllm":
        try:
            import vllm  # noqa: F401
        except ImportError:
            pass
        else:
            pytest.skip("vllm is installed here")
    for name, value in broken.items():
        setattr(settings, name, value)
    reset_engines()
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Hello?")
    event = await socket.receive()
    assert event["type"] == "error" and event["code"] == "engine_unavailable"
    assert "not sent" in event["message"]
    assert await database_sync_to_async(conversation.messages.count)() == 0
    await socket.send(action="cancel")  # still open, still answering
    assert (await socket.receive())["code"] == "nothing_to_cancel"


async def test_a_stop_after_the_last_token_leaves_a_complete_reply_without_cancel_fields(
    connect: Any, alice: Any, conversation: Conversation, stepped_engine: Any
) -> None:
    """Bug c: cancelled_by and cancel_requested_at stayed on a complete reply."""
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Hi")
    stream = await stepped_engine.next_stream()
    stream.emit("The whole answer.", finish=FinishReason.STOP)
    await socket.receive_until(is_delta)
    await socket.send(action="cancel")
    events = await socket.receive_until(finished)
    reply = events[-1]["message"]
    assert reply["status"] == "complete"
    assert reply["content"] == "The whole answer."
    assert reply["cancelled_by"] == "" and reply["cancel_requested_at"] is None
    row = await reply_of(conversation)
    assert row.cancelled_by == "" and row.cancel_requested_at is None


async def test_a_generation_whose_row_was_settled_elsewhere_stops_its_engine(
    connect: Any, alice: Any, conversation: Conversation, stepped_engine: Any, settings: Any
) -> None:
    """Bug d: a reply marked interrupted by another process kept its engine running."""
    settings.CHAT_FLUSH_INTERVAL_S = 0.05
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Hi")
    stream = await stepped_engine.next_stream()
    stream.emit("partial ")
    await socket.receive_until(is_delta)
    row = await reply_of(conversation)
    moved = await database_sync_to_async(Message.objects.transition)(
        row.pk, from_=Message.ACTIVE_STATUSES, to=Message.Status.INTERRUPTED, heartbeat_at=None
    )
    assert moved
    async with asyncio.timeout(5):
        await stream.abort_requested.wait()
    events = await socket.receive_until(finished)
    assert events[-1]["message"]["status"] == "interrupted", "the winner's state is what tabs see"
    assert (await reply_of(conversation)).status == Message.Status.INTERRUPTED


async def test_a_stalled_engine_that_ignores_stop_still_ends_the_reply(
    connect: Any, alice: Any, conversation: Conversation, stepped_engine: Any, settings: Any
) -> None:
    """Bug e: the stall path waited for the engine's stop confirmation without a bound."""
    settings.CHAT_STALL_TIMEOUT_S = 0.2
    stepped_engine.hangs = True
    stepped_engine.stop_timeout_s = 0.2
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Hi")
    stream = await stepped_engine.next_stream()
    events = await socket.receive_until(finished)
    reply = events[-1]["message"]
    assert reply["status"] == "error" and "produced nothing" in reply["error"]
    assert stream.abort_requested.is_set()
    await socket.send(action="send", content="Again")  # the conversation is free again
    await stepped_engine.next_stream()


async def test_dead_replies_in_other_conversations_do_not_count_against_the_limit(
    connect: Any, alice: Any, conversation: Conversation, stepped_engine: Any, settings: Any
) -> None:
    """Bug f: only the current conversation's dead replies were recovered before counting."""
    settings.CHAT_MAX_ACTIVE_PER_USER = 1

    def leave_a_dead_reply() -> None:
        other = Conversation.objects.create(owner=alice, title="other")
        Message.objects.create(
            conversation=other,
            role=Message.Role.ASSISTANT,
            status=Message.Status.STREAMING,
            heartbeat_at=timezone.now() - timedelta(hours=1),
        )

    await database_sync_to_async(leave_a_dead_reply)()
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Hi")
    event = await socket.receive()
    assert event["type"] == "message.started", event
    stream = await stepped_engine.next_stream()
    stream.end()
    await socket.receive_until(finished)


async def test_a_slow_tab_does_not_hold_back_the_other_tabs(
    connect: Any,
    alice: Any,
    conversation: Conversation,
    stepped_engine: Any,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bug g: a snapshot for a tab with a full channel held the send lock while it waited."""
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels.layers.InMemoryChannelLayer", "CONFIG": {"capacity": 5}}
    }
    channel_layers.backends.clear()
    monkeypatch.setattr(broadcast, "CHANNEL_FULL_ATTEMPTS", 10_000)  # it waits for minutes
    layer = get_channel_layer()
    slow = await layer.new_channel()
    with pytest.raises(ChannelFull):
        for _ in range(10):
            await layer.send(slow, {"type": "chat.pong", "message_id": 0})

    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Hi")
    stream = await stepped_engine.next_stream()
    stream.emit("one ")
    await socket.receive_until(is_delta)
    row = await reply_of(conversation)
    await broadcast.to_group(conversation.group_name, Sync(message_id=row.pk, reply_channel=slow))
    await asyncio.sleep(0.1)  # the snapshot for the slow tab is now waiting for room
    stream.emit("two ")
    events = await socket.receive_until(is_delta, timeout=3)
    assert events[-1]["text"] == "two "
    stream.end()
    events = await socket.receive_until(finished)
    assert events[-1]["message"]["content"] == "one two "


async def test_a_failed_flush_is_written_at_the_next_interval_without_new_text(
    connect: Any,
    alice: Any,
    conversation: Conversation,
    stepped_engine: Any,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bug h: the flushed offset advanced before the UPDATE, so a failed flush was never redone."""
    settings.CHAT_FLUSH_INTERVAL_S = 0.05
    real_flush = rows.flush
    failures: list[str] = []

    def flaky_flush(message_id: int, content: str | None, *, look_for_stop: bool) -> Any:
        if content and not failures:
            failures.append(content)
            raise DatabaseError("the database went away for a moment")
        return real_flush(message_id, content, look_for_stop=look_for_stop)

    monkeypatch.setattr(rows, "flush", flaky_flush)
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Hi")
    stream = await stepped_engine.next_stream()
    stream.emit("kept after a failed flush")
    row = await wait_for_reply(conversation, lambda row: row.content != "")
    assert failures == ["kept after a failed flush"]
    assert row.content == "kept after a failed flush" and row.is_active
    stream.end()
    await socket.receive_until(finished)


@pytest.mark.model
async def test_the_first_send_loads_the_model_without_holding_the_users_row(
    connect: Any,
    alice: Any,
    conversation: Conversation,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bug j: the embedded model loaded inside the transaction that locks the user's row."""
    settings.CHAT_ENGINE = "llamacpp"
    settings.CHAT_MAX_TOKENS = 4
    reset_engines()
    real_load = LlamaCppEngine.model_instance
    seen: list[bool] = []

    def row_is_free() -> bool:
        """From another connection: can alice's row be locked (PostgreSQL) or written now?"""
        try:
            with transaction.atomic():
                users = get_user_model().objects.filter(pk=alice.pk)
                if connection.features.has_select_for_update_nowait:
                    list(users.select_for_update(nowait=True))
                users.update(last_login=timezone.now())
            return True
        except DatabaseError:
            return False
        finally:
            connection.close()  # this thread's own connection, back to the pool

    def spying_load(engine: LlamaCppEngine) -> Any:
        if engine._llm is None:  # the load itself
            result: list[bool] = []
            checker = threading.Thread(target=lambda: result.append(row_is_free()))
            checker.start()
            checker.join()
            seen.append(result[0])
        return real_load(engine)

    monkeypatch.setattr(LlamaCppEngine, "model_instance", spying_load)
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Hi")
    events = await socket.receive_until(finished, timeout=60)
    assert events[-1]["message"]["status"] == "complete"
    assert seen and all(seen), "the user's row was locked while the model loaded"


async def test_every_tab_sees_the_same_text_as_the_saved_reply(
    connect: Any, alice: Any, conversation: Conversation, stepped_engine: Any
) -> None:
    first, _, _ = await connect(alice, conversation.pk)
    await first.send(action="send", content="Hi")
    stream = await stepped_engine.next_stream()
    stream.emit("a ")
    seen_by_first = await first.receive_until(is_delta)
    second, _, _ = await connect(alice, conversation.pk)  # joins mid-reply: a snapshot
    stream.emit("b ")
    stream.fail(EngineError("the engine broke"))
    seen_by_first += await first.receive_until(finished)
    seen_by_second = await second.receive_until(finished)
    for events in (seen_by_first, seen_by_second):
        assert events[-1]["message"]["status"] == "error"
        assert events[-1]["message"]["content"] == "a b "
    assert streamed_text(seen_by_first) == "a b "
    assert "a b ".startswith(streamed_text(seen_by_second))


async def test_a_final_save_outlasting_a_database_outage_keeps_the_whole_reply(
    connect: Any,
    alice: Any,
    conversation: Conversation,
    stepped_engine: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 10, problem 7: the final save failed once and was never retried; recovery then
    marked the row interrupted with the last flushed text, which the tabs were shown."""
    from conversations.generation import endings
    from conversations.generation.recovery import INTERRUPTED_ERROR

    monkeypatch.setattr(endings, "FINAL_SAVE_FIRST_PAUSE_S", 0.05)
    real_finish = rows.finish
    attempts: list[bool] = []

    def database_away_for_a_while(*args: Any, retrying: bool = False) -> Any:
        attempts.append(retrying)
        if len(attempts) < 4:
            if len(attempts) == 2:  # meanwhile another process takes the reply for dead
                Message.objects.filter(pk=args[0].message_id).update(
                    status=Message.Status.INTERRUPTED, error=INTERRUPTED_ERROR, content="par"
                )
            raise DatabaseError("the database is away")
        return real_finish(*args, retrying=retrying)

    monkeypatch.setattr(rows, "finish", database_away_for_a_while)
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="send", content="Hi")
    stream = await stepped_engine.next_stream()
    stream.emit("partial and then the rest")
    stream.end()
    events = await socket.receive_until(finished)
    assert events[-1]["message"]["status"] == "complete"
    assert events[-1]["message"]["content"] == "partial and then the rest"
    row = await reply_of(conversation)
    assert (row.status, row.content, row.error) == ("complete", "partial and then the rest", "")
    assert attempts == [False, True, True, True]
