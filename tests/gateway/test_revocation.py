"""A revoked API token ends the calls made with it: the service's revocation reaches the server's
process through the channel layer, the reply is stopped through the generation lifecycle and
saved as cancelled, and the call ends with a `token_revoked` error."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import openai
import pytest
from channels.db import database_sync_to_async

from conversations.models import ApiToken, Conversation, Message
from conversations.services.tokens import api_token_create, api_token_revoke
from tests.gateway.conftest import BOUND_S, Gateway, eventually
from tests.support.replies import full_reply, wait_until_settled
from tests.support.servers import NEEDS_SHARED_SERVICES

pytestmark = [
    pytest.mark.processes,
    pytest.mark.django_db(transaction=True),
    NEEDS_SHARED_SERVICES,
]

HELLO = [{"role": "user", "content": "Hello"}]
LONG = 2000  # tokens: a reply that runs for 40 s unless something stops it


def token_and_key(user: Any, name: str) -> tuple[ApiToken, str]:
    return api_token_create(user=user, name=name)


async def revoke(token: ApiToken) -> None:
    assert await database_sync_to_async(api_token_revoke)(token=token)


async def test_revoking_the_token_ends_its_stream(
    gateway: Callable[..., Gateway], alice: Any
) -> None:
    token, key = await database_sync_to_async(token_and_key)(alice, "laptop")
    other, _ = await database_sync_to_async(token_and_key)(alice, "phone")
    server = gateway(CHAT_SCRIPTED_TOKENS=LONG)
    raw = await server.client(key).chat.completions.with_raw_response.create(
        model="default", messages=HELLO, stream=True
    )
    stream = raw.parse()
    received = [await anext(stream) for _ in range(3)]
    await revoke(other)  # another token of hers: this call goes on
    received += [await anext(stream) for _ in range(3)]
    await revoke(token)
    with pytest.raises(openai.APIError) as ended:
        async with asyncio.timeout(BOUND_S):  # only keeps a broken build from hanging
            async for chunk in stream:
                received.append(chunk)

    assert not isinstance(ended.value, openai.APIStatusError), "the status was 200"
    assert ended.value.body["code"] == "token_revoked"  # type: ignore[index]
    conversation = await database_sync_to_async(Conversation.objects.get)(
        pk=raw.headers["x-chatsite-conversation"]
    )
    row = await wait_until_settled(conversation)
    assert row.status == Message.Status.CANCELLED and row.cancelled_by == "token_revoked"
    assert row.cancel_latency_ms is not None and row.completion_tokens < LONG
    streamed = "".join(c.choices[0].delta.content or "" for c in received if c.choices)
    assert streamed == row.content and full_reply(row.completion_tokens).startswith(row.content)
    # And the token lets nothing more in.
    with pytest.raises(openai.AuthenticationError):
        await server.client(key).models.list()


async def test_revoking_the_token_ends_a_call_waiting_for_its_whole_reply(
    gateway: Callable[..., Gateway], alice: Any
) -> None:
    token, key = await database_sync_to_async(token_and_key)(alice, "script")
    server = gateway(CHAT_SCRIPTED_TOKENS=LONG)
    call = asyncio.create_task(
        server.client(key).chat.completions.create(model="default", messages=HELLO)
    )

    def writing() -> Message | None:
        return Message.objects.filter(
            conversation__owner=alice, role="assistant", status=Message.Status.STREAMING
        ).first()

    reply = await eventually(database_sync_to_async(writing))
    await revoke(token)
    with pytest.raises(openai.AuthenticationError) as refused:
        await call
    assert refused.value.response.json()["error"]["code"] == "token_revoked"
    reply = await wait_until_settled(await database_sync_to_async(lambda: reply.conversation)())
    assert reply.status == Message.Status.CANCELLED and reply.cancelled_by == "token_revoked"


async def test_a_token_revoked_before_its_call_is_refused(
    gateway: Callable[..., Gateway], alice: Any, charlie: Any
) -> None:
    token, key = await database_sync_to_async(token_and_key)(alice, "old")
    _, charlies = await database_sync_to_async(token_and_key)(charlie, "charlie's")
    await revoke(token)
    server = gateway(CHAT_SCRIPTED_TOKENS=2)
    with pytest.raises(openai.AuthenticationError):
        await server.client(key).chat.completions.create(model="default", messages=HELLO)
    # Charlie's token is his own: alice's revocation does nothing to it.
    reply = await server.client(charlies).chat.completions.create(model="default", messages=HELLO)
    assert reply.choices[0].finish_reason == "stop"
