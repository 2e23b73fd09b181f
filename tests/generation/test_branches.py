"""Regenerate, edit, continue and retry: another version of a turn, through the same lifecycle,
with the model given the branch shown, and every tab told."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.urls import reverse

from conversations.engines.base import ChatMessage
from conversations.engines.scripted import scripted_token
from conversations.models import Conversation, Message
from tests.support.replies import full_reply
from tests.support.sockets import finished, started

pytestmark = [pytest.mark.django_db(transaction=True)]


def asked(engine: Any, reply: dict[str, Any]) -> list[ChatMessage]:
    """What the engine itself was given for this reply, system prompt left out."""
    return [m for m in engine.records[reply["request_id"]].messages if m.role != "system"]


async def turn(socket: Any, **frame: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Send a frame that starts a reply; its started event and its final message."""
    await socket.send(**frame)
    events = await socket.receive_until(finished)
    return events[0], events[-1]["message"]


async def refreshed(conversation: Conversation) -> Conversation:
    await database_sync_to_async(conversation.refresh_from_db)()
    return conversation


async def test_regenerate_adds_a_version_and_the_model_sees_the_same_question(
    connect: Any, alice: Any, conversation: Any, scripted_engine: Any
) -> None:
    socket, _, _ = await connect(alice, conversation.pk)
    _, first = await turn(socket, action="send", content="Name a colour")
    start, second = await turn(socket, action="regenerate")

    assert start["type"] == "message.started" and start["user_message"] is None
    assert start["after"] == first["parent"], "the new version follows the same question"
    assert second["parent"] == first["parent"] and second["id"] != first["id"]
    assert second["version"] == [2, 2, first["id"], None]
    assert asked(scripted_engine, second) == [ChatMessage("user", "Name a colour")]
    assert (await refreshed(conversation)).current_leaf_id == second["id"]
    rows = await database_sync_to_async(lambda: list(conversation.messages.values_list("pk")))()
    assert len(rows) == 3, "the first version is kept"


async def test_selecting_a_version_switches_every_tab_and_the_next_context(
    connect: Any, alice: Any, conversation: Any, scripted_engine: Any
) -> None:
    socket, _, _ = await connect(alice, conversation.pk)
    other, _, _ = await connect(alice, conversation.pk)
    _, first = await turn(socket, action="send", content="Name a colour")
    _, second = await turn(socket, action="regenerate")
    await other.receive_until(
        lambda e: e["type"] == "message.finished" and e["message"]["id"] == second["id"]
    )

    await socket.send(action="select", message_id=first["id"])
    for tab in (socket, other):
        (branch,) = [
            e for e in await tab.receive_until(lambda e: e["type"] == "conversation.branch")
        ]
        assert [m["id"] for m in branch["messages"]] == [first["parent"], first["id"]]
        assert branch["messages"][1]["version"] == [1, 2, None, second["id"]]
    assert (await refreshed(conversation)).current_leaf_id == first["id"]

    _, follow_up = await turn(socket, action="send", content="Why that one?")
    assert asked(scripted_engine, follow_up) == [
        ChatMessage("user", "Name a colour"),
        ChatMessage("assistant", first["content"]),
        ChatMessage("user", "Why that one?"),
    ], "the model is given the version shown, not the newest"


async def test_edit_starts_a_branch_and_the_model_sees_only_it(
    connect: Any, alice: Any, conversation: Any, scripted_engine: Any
) -> None:
    socket, _, _ = await connect(alice, conversation.pk)
    first_start, first = await turn(socket, action="send", content="Hello")
    _, second = await turn(socket, action="send", content="And then?")
    question = first_start["user_message"]

    start, reply = await turn(
        socket, action="edit", message_id=question["id"], content="Hello, in French"
    )
    edited = start["user_message"]
    assert start["after"] is None, "an edit of the first message starts from the top"
    assert edited["parent"] is None and edited["version"] == [2, 2, question["id"], None]
    assert reply["parent"] == edited["id"]
    assert asked(scripted_engine, reply) == [ChatMessage("user", "Hello, in French")]

    # Editing the second question keeps the first exchange of the branch shown.
    later = await database_sync_to_async(
        lambda: conversation.messages.filter(content="And then?").get()
    )()
    await database_sync_to_async(
        lambda: Conversation.objects.filter(pk=conversation.pk).update(current_leaf=second["id"])
    )()
    start, reply = await turn(socket, action="edit", message_id=later.pk, content="What next?")
    assert start["after"] == first["id"]
    assert asked(scripted_engine, reply) == [
        ChatMessage("user", "Hello"),
        ChatMessage("assistant", first["content"]),
        ChatMessage("user", "What next?"),
    ]


async def test_continue_writes_on_from_a_reply_cut_off_at_the_length_limit(
    connect: Any, alice: Any, scripted_engine: Any
) -> None:
    conversation = await database_sync_to_async(Conversation.objects.create)(
        owner=alice, max_tokens=3
    )
    socket, _, _ = await connect(alice, conversation.pk)
    _, cut = await turn(socket, action="send", content="Count")
    assert cut["finish_reason"] == "length" and cut["content"] == full_reply(3)

    start, continued = await turn(socket, action="continue")
    assert start["message"]["content"] == cut["content"], "it starts from the text so far"
    assert continued["content"] == full_reply(3) + "".join(scripted_token(i) for i in range(3))
    assert continued["version"] == [2, 2, cut["id"], None] and continued["parent"] == cut["parent"]
    seen = scripted_engine.records[continued["request_id"]]
    assert seen.messages[-1] == ChatMessage("assistant", full_reply(3))
    assert seen.params.continue_final is True


async def test_continue_and_regenerate_need_a_reply_to_act_on(
    connect: Any, alice: Any, conversation: Any
) -> None:
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="regenerate")
    assert (await socket.receive())["code"] == "nothing_to_redo"
    await turn(socket, action="send", content="Hello")  # ends by itself: nothing to continue
    await socket.send(action="continue")
    assert (await socket.receive())["code"] == "nothing_to_redo"


async def test_retry_after_a_failure(
    connect: Any, alice: Any, conversation: Any, scripted_engine: Any
) -> None:
    scripted_engine.fail_after = 2
    socket, _, _ = await connect(alice, conversation.pk)
    _, failed = await turn(socket, action="send", content="Hello")
    assert failed["status"] == "error"
    scripted_engine.fail_after = None
    _, retried = await turn(socket, action="retry")
    assert retried["status"] == "complete" and retried["parent"] == failed["parent"]
    assert asked(scripted_engine, retried) == [ChatMessage("user", "Hello")]


async def test_a_failed_retry_takes_the_place_of_the_failed_version(
    connect: Any, alice: Any, conversation: Any, scripted_engine: Any
) -> None:
    scripted_engine.fail_after = 2
    socket, _, _ = await connect(alice, conversation.pk)
    _, failed = await turn(socket, action="send", content="Hello")
    _, failed_again = await turn(socket, action="retry")
    _, failed_a_third_time = await turn(socket, action="retry")

    assert failed_a_third_time["status"] == "error"
    assert failed_a_third_time["version"] == [1, 1, None, None], "one version, not three"
    replies = await database_sync_to_async(
        lambda: list(conversation.messages.filter(role="assistant").values_list("pk", flat=True))
    )()
    assert replies == [failed_a_third_time["id"]]
    assert failed["id"] != failed_again["id"] != failed_a_third_time["id"]
    assert (await refreshed(conversation)).current_leaf_id == failed_a_third_time["id"]


async def test_regenerate_keeps_a_failed_version(
    connect: Any, alice: Any, conversation: Any, scripted_engine: Any
) -> None:
    socket, _, _ = await connect(alice, conversation.pk)
    await turn(socket, action="send", content="Hello")
    scripted_engine.fail_after = 2
    _, failed = await turn(socket, action="regenerate")
    scripted_engine.fail_after = None
    _, retried = await turn(socket, action="retry")
    assert retried["version"] == [2, 2, retried["version"][2], None], "the first reply is kept"
    rows = await database_sync_to_async(lambda: conversation.messages.count())()
    assert rows == 3 and failed["id"] != retried["id"]


async def test_a_version_cannot_be_chosen_while_a_reply_is_written(
    connect: Any, alice: Any, conversation: Any, scripted_engine: Any, settings: Any
) -> None:
    socket, _, _ = await connect(alice, conversation.pk)
    _, first = await turn(socket, action="send", content="Hello")
    scripted_engine.tokens = 1000
    await socket.send(action="regenerate")
    await socket.receive_until(started)
    await socket.send(action="select", message_id=first["id"])
    error = await socket.receive_until(lambda e: e["type"] == "error")
    assert error[-1]["code"] == "reply_in_progress"
    await socket.send(action="cancel")
    await socket.receive_until(finished)


async def test_messages_of_another_conversation_cannot_be_edited_or_chosen(
    connect: Any, alice: Any, charlie: Any, conversation: Any
) -> None:
    theirs = await database_sync_to_async(Conversation.objects.create)(owner=charlie)
    message = await database_sync_to_async(Message.objects.create)(
        conversation=theirs, role="user", content="secret"
    )
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="edit", message_id=message.pk, content="mine now")
    assert (await socket.receive())["code"] == "no_such_message"
    await socket.send(action="select", message_id=message.pk)
    assert (await socket.receive())["code"] == "no_such_message"
    assert await database_sync_to_async(theirs.messages.count)() == 1


async def test_the_api_shows_every_version_and_which_is_current(
    connect: Any, alice: Any, conversation: Any, client: Any
) -> None:
    socket, _, _ = await connect(alice, conversation.pk)
    _, first = await turn(socket, action="send", content="Hello")
    _, second = await turn(socket, action="regenerate")
    await database_sync_to_async(client.force_login)(alice)
    url = reverse("api-conversation-detail", args=[conversation.pk])
    data = (await database_sync_to_async(client.get)(url)).json()
    assert data["current_message"] == second["id"]
    by_id = {m["id"]: m for m in data["messages"]}
    assert by_id[first["id"]]["is_current"] is False
    assert by_id[second["id"]]["is_current"] is True
    assert by_id[first["id"]]["version"] == [1, 2, None, second["id"]]
    markdown = (
        await database_sync_to_async(client.get)(
            reverse("api-conversation-export", args=[conversation.pk]), {"format": "markdown"}
        )
    ).content.decode()
    assert "version 2 of 2" in markdown, "the transcript is the branch shown"
    assert markdown.count("## Assistant") == 1


async def test_a_double_clicked_regenerate_starts_one_reply(
    connect: Any, alice: Any, conversation: Any
) -> None:
    socket, _, _ = await connect(alice, conversation.pk)
    await turn(socket, action="send", content="Hello")
    await socket.send(action="regenerate", idempotency_key="click-1")
    await socket.send(action="regenerate", idempotency_key="click-1")
    events = await socket.receive_until(lambda e: e["type"] == "error")
    assert events[-1]["code"] in {"duplicate", "reply_in_progress"}
    await socket.receive_until(finished)
    replies = await database_sync_to_async(
        lambda: conversation.messages.filter(role="assistant").count()
    )()
    assert replies == 2, "the first reply and one regenerated version"


async def test_choosing_a_message_of_a_plain_list_keeps_the_messages_before_it(
    connect: Any, alice: Any, conversation: Any
) -> None:
    rows = [
        await database_sync_to_async(Message.objects.create)(
            conversation=conversation, role=role, content=content
        )
        for role, content in [("user", "a"), ("assistant", "b"), ("user", "c")]
    ]
    socket, _, _ = await connect(alice, conversation.pk)
    await socket.send(action="select", message_id=rows[1].pk)
    branch = (await socket.receive_until(lambda e: e["type"] == "conversation.branch"))[-1]
    assert [m["content"] for m in branch["messages"]] == ["a", "b", "c"], "its newest descendant"
