"""One conversation per chat: a front end that sends the whole history with every turn (Open
WebUI) makes one conversation, its housekeeping calls none; an edited history branches; only the
same token's conversations are continued; a token can keep none of its calls, or all of them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
import pytest
from channels.db import database_sync_to_async
from django.test import Client
from django.urls import reverse

from conversations.models import ApiToken, Conversation, GatewayPath, Message
from conversations.services.tokens import api_token_create
from tests.gateway.conftest import Gateway, eventually, request_id_of
from tests.support.replies import full_reply, wait_until_settled
from tests.support.servers import NEEDS_SHARED_SERVICES

pytestmark = [
    pytest.mark.processes,
    pytest.mark.django_db(transaction=True),
    NEEDS_SHARED_SERVICES,
]

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
HOUSEKEEPING = {"X-Chatsite-Housekeeping": "1"}
QUESTIONS = ["What is a kumquat?", "Is it sweet?", "Where does it grow?", "In pots?", "Thanks!"]


def user(content: str) -> dict[str, str]:
    return {"role": "user", "content": content}


def assistant(content: str) -> dict[str, str]:
    return {"role": "assistant", "content": content}


async def streamed(client: openai.AsyncOpenAI, messages: list[dict[str, str]]) -> tuple[str, str]:
    """A turn as Open WebUI makes it (streamed): the reply as the client received it, and the
    conversation the call went to."""
    raw = await client.chat.completions.with_raw_response.create(
        model="default", messages=messages, stream=True
    )
    text = "".join([chunk.choices[0].delta.content or "" async for chunk in raw.parse()])
    return text, raw.headers["x-chatsite-conversation"]


async def housekeeping(client: openai.AsyncOpenAI, task: str, history: list[Any]) -> str:
    """A title or tag request as Open WebUI sends it: one user message quoting the chat."""
    quoted = "\n".join(f"{m['role'].upper()}: {m['content']}" for m in history)
    raw = await client.chat.completions.with_raw_response.create(
        model="default",
        messages=[user(f"### Task:\n{task}\n<chat_history>\n{quoted}\n</chat_history>")],
        extra_headers=HOUSEKEEPING,
    )
    assert raw.parse().choices[0].message.content
    return raw.headers["x-chatsite-conversation"]


def conversations_of(owner: Any) -> list[Conversation]:
    return list(Conversation.objects.filter(owner=owner).order_by("created_at"))


def branch(conversation: Conversation) -> list[tuple[str, str]]:
    """The branch shown, from the root: each message's role and content."""
    by_id = {m.pk: m for m in Message.objects.filter(conversation=conversation)}
    line: list[Message] = []
    leaf = by_id.get(Conversation.objects.get(pk=conversation.pk).current_leaf_id or 0)
    while leaf is not None:
        line.insert(0, leaf)
        leaf = by_id.get(leaf.parent_id or 0)
    return [(m.role, m.content) for m in line]


async def test_it_keeps_an_open_webui_chat_as_one_conversation(
    gateway: Callable[..., Gateway], alice: Any, alice_key: str
) -> None:
    server = gateway(CHAT_SCRIPTED_TOKENS=4)
    client = server.client(alice_key)
    history: list[dict[str, str]] = []
    chats, chores = set(), set()
    for question in QUESTIONS:
        reply, chat = await streamed(client, [SYSTEM, *history, user(question)])
        history += [user(question), assistant(reply)]
        chats.add(chat)
        chores.add(await housekeeping(client, "Generate a concise title.", history))
        chores.add(await housekeeping(client, "Generate 1-3 broad tags.", history))

    async def only_the_chat_is_left() -> list[Conversation]:
        left = await database_sync_to_async(conversations_of)(alice)
        return left if len(left) == 1 else []

    (conversation,) = await eventually(only_the_chat_is_left)
    assert chats == {str(conversation.pk)} and str(conversation.pk) not in chores
    assert len(chores) == 2 * len(QUESTIONS)  # each its own conversation, each deleted
    count = database_sync_to_async(Message.objects.filter(conversation=conversation).count)
    assert await count() == 10
    assert await database_sync_to_async(branch)(conversation) == [
        (m["role"], m["content"]) for m in history
    ]
    assert conversation.title == QUESTIONS[0] and conversation.origin == "api"


async def test_the_model_is_given_the_conversation_it_goes_on_in(
    gateway: Callable[..., Gateway], alice_key: str
) -> None:
    server = gateway(CHAT_SCRIPTED_TOKENS=3)
    client = server.client(alice_key)
    first = await client.chat.completions.create(model="default", messages=[user("One")])
    second = await client.chat.completions.create(
        model="default",
        messages=[
            SYSTEM,
            user("One"),
            assistant(first.choices[0].message.content or ""),
            user("Two"),
        ],
    )

    record = await server.engine_record(request_id_of(second.id))
    assert record["messages"] == [
        ["system", SYSTEM["content"]],
        ["user", "One"],
        ["assistant", full_reply(3)],
        ["user", "Two"],
    ]


async def test_an_edited_history_goes_on_from_the_last_reply_it_shares(
    gateway: Callable[..., Gateway], alice: Any, alice_key: str
) -> None:
    server = gateway(CHAT_SCRIPTED_TOKENS=3)
    client = server.client(alice_key)
    reply = full_reply(3)
    _, chat = await streamed(client, [user("One")])
    await streamed(client, [user("One"), assistant(reply), user("Two")])
    # The second question edited in the front end, and the chat gone on from there.
    edited = [user("One"), assistant(reply), user("Two, edited"), assistant(reply), user("Three")]
    _, going_on = await streamed(client, edited)
    # That new branch goes on as any other.
    _, again = await streamed(client, [*edited, assistant(reply), user("Four")])
    # The first question edited: no reply in common, a conversation of its own.
    _, other = await streamed(client, [user("One, edited"), assistant(reply), user("Two")])

    assert going_on == again == chat != other
    conversation = await database_sync_to_async(Conversation.objects.get)(pk=chat)
    shown = [
        ("user", "One"),
        ("assistant", reply),
        ("user", "Two, edited"),
        ("assistant", reply),
        ("user", "Three"),
        ("assistant", reply),
        ("user", "Four"),
        ("assistant", reply),
    ]
    assert await database_sync_to_async(branch)(conversation) == shown

    def versions_of_the_second_question() -> list[str]:
        (first_reply,) = Message.objects.get(conversation_id=chat, parent=None).children.all()
        return list(first_reply.children.order_by("pk").values_list("content", flat=True))

    assert await database_sync_to_async(versions_of_the_second_question)() == [
        "Two",
        "Two, edited",
    ]
    assert len(await database_sync_to_async(conversations_of)(alice)) == 2


async def test_only_the_same_tokens_conversations_are_continued(
    gateway: Callable[..., Gateway], alice: Any, alice_key: str, charlie: Any, charlie_key: str
) -> None:
    server = gateway(CHAT_SCRIPTED_TOKENS=3)
    _, other_key = await database_sync_to_async(api_token_create)(user=alice, name="laptop")
    _, chat = await streamed(server.client(alice_key), [user("One")])
    history = [user("One"), assistant(full_reply(3)), user("Two")]

    _, charlies = await streamed(server.client(charlie_key), history)
    _, other_tokens = await streamed(server.client(other_key), history)
    _, same_tokens = await streamed(server.client(alice_key), history)

    assert same_tokens == chat
    assert len({chat, charlies, other_tokens}) == 3
    # A client's own history (not a reply this server wrote) is never gone on from: the same
    # few-shot examples sent with every call make a conversation each.
    _, own = await streamed(server.client(charlie_key), history)
    assert own != charlies
    counts = database_sync_to_async(
        lambda: {
            str(c.pk): Message.objects.filter(conversation=c).count()
            for c in Conversation.objects.all()
        }
    )
    assert await counts() == {chat: 4, charlies: 4, other_tokens: 4, own: 4}


async def test_a_chat_whose_reply_is_being_written_answers_409(
    gateway: Callable[..., Gateway], alice_key: str
) -> None:
    server = gateway(CHAT_SCRIPTED_TOKENS=2000)
    client = server.client(alice_key)
    first = await client.chat.completions.create(
        model="default", messages=[user("One")], max_tokens=3
    )
    history = [user("One"), assistant(first.choices[0].message.content or "")]
    writing = await client.chat.completions.create(
        model="default", messages=[*history, user("Two")], stream=True
    )
    await anext(writing)  # the reply has started

    with pytest.raises(openai.ConflictError) as refused:
        await client.chat.completions.create(model="default", messages=[*history, user("Two?")])
    await writing.close()
    assert refused.value.code == "reply_in_progress"


async def test_a_reply_the_client_left_is_gone_on_from_as_it_was_kept(
    gateway: Callable[..., Gateway], alice_key: str
) -> None:
    server = gateway(CHAT_SCRIPTED_TOKENS=2000)
    client = server.client(alice_key)
    raw = await client.chat.completions.with_raw_response.create(
        model="default", messages=[user("Go on")], stream=True
    )
    stream = raw.parse()
    [await anext(stream) for _ in range(3)]
    await stream.close()
    chat = raw.headers["x-chatsite-conversation"]
    kept = await wait_until_settled(await database_sync_to_async(Conversation.objects.get)(pk=chat))
    assert kept.status == Message.Status.CANCELLED

    async def keyed() -> bool:  # once its stop is saved, after the response has ended
        return await database_sync_to_async(GatewayPath.objects.filter(message=kept).exists)()

    assert await eventually(keyed)
    going_on = await client.chat.completions.with_raw_response.create(
        model="default",
        messages=[user("Go on"), assistant(kept.content), user("Why stop?")],
        max_tokens=2,
    )
    assert going_on.headers["x-chatsite-conversation"] == chat


async def test_a_token_that_records_none_leaves_nothing(
    gateway: Callable[..., Gateway], alice: Any
) -> None:
    server = gateway(CHAT_SCRIPTED_TOKENS=3)
    browser = Client()
    await database_sync_to_async(browser.force_login)(alice)
    post = database_sync_to_async(browser.post)
    created = await post(
        reverse("api-tokens"), {"name": "private", "recording": "none"}, follow=True
    )
    assert created.status_code == 200
    key = created.context["key"]
    page = (await database_sync_to_async(browser.get)(reverse("api-tokens"))).content.decode()
    assert '<td class="token-recording">none</td>' in page
    client = server.client(key)

    await streamed(client, [user("One")])
    await streamed(client, [user("One"), assistant(full_reply(3)), user("Two")])
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(
            model="default",
            messages=[user("Three")],
            extra_headers={"X-Chatsite-Conversation": "00000000-0000-0000-0000-000000000000"},
        )
    assert refused.value.code == "recording_off"

    async def nothing_kept() -> bool:
        exists = Conversation.objects.filter(owner=alice).exists
        return not await database_sync_to_async(exists)()

    assert await eventually(nothing_kept)


async def test_a_token_can_keep_its_calls_on_a_server_that_keeps_none(
    gateway: Callable[..., Gateway], alice: Any, alice_key: str
) -> None:
    server = gateway(CHAT_GATEWAY_RECORD=0, CHAT_SCRIPTED_TOKENS=3)
    browser = Client()
    await database_sync_to_async(browser.force_login)(alice)
    created = await database_sync_to_async(browser.post)(
        reverse("api-tokens"), {"name": "notes", "recording": "all"}, follow=True
    )
    keeps = server.client(created.context["key"])
    assert '<td class="token-recording">every call</td>' in created.content.decode()

    _, chat = await streamed(keeps, [user("Keep me")])
    _, going_on = await streamed(keeps, [user("Keep me"), assistant(full_reply(3)), user("More")])
    await streamed(server.client(alice_key), [user("Forget me")])  # the server's default

    async def only_the_kept_one() -> bool:
        left = await database_sync_to_async(conversations_of)(alice)
        return [str(c.pk) for c in left] == [chat]

    assert going_on == chat and await eventually(only_the_kept_one)
    token = await database_sync_to_async(ApiToken.objects.get)(name="notes")
    assert token.recording == ApiToken.Recording.ALL
