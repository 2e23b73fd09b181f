"""Where a call is kept: the owner's history (the API, search, exports) and nobody else's; going on
in a conversation with X-Chatsite-Conversation; /v1/models; and a deployment that records nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import Group

from conversations.models import Conversation
from tests.gateway.conftest import Gateway, eventually, request_id_of
from tests.support.chat_models import MODELS
from tests.support.replies import full_reply
from tests.support.servers import NEEDS_SHARED_SERVICES

pytestmark = [
    pytest.mark.processes,
    pytest.mark.django_db(transaction=True),
    NEEDS_SHARED_SERVICES,
]


def api(server: Gateway, key: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.origin, headers={"Authorization": f"Bearer {key}"})


async def test_a_call_is_in_its_owners_history_only(
    gateway: Callable[..., Gateway], alice_key: str, charlie_key: str
) -> None:
    server = gateway(CHAT_SCRIPTED_TOKENS=4)
    raw = await server.client(alice_key).chat.completions.with_raw_response.create(
        model="default", messages=[{"role": "user", "content": "What is a kumquat?"}]
    )
    conversation_id = raw.headers["x-chatsite-conversation"]

    async with api(server, alice_key) as alice, api(server, charlie_key) as charlie:
        listed = (await alice.get("/api/conversations/", params={"q": "kumquat"})).json()
        detail = (await alice.get(f"/api/conversations/{conversation_id}/")).json()
        export = await alice.get("/api/export.jsonl")
        strangers_list = (await charlie.get("/api/conversations/")).json()
        strangers_detail = await charlie.get(f"/api/conversations/{conversation_id}/")
        strangers_export = await charlie.get("/api/export.jsonl")

    assert [c["id"] for c in listed["results"]] == [conversation_id]
    assert [m["content"] for m in detail["messages"]] == ["What is a kumquat?", full_reply(4)]
    assert detail["messages"][1]["request_id"] == request_id_of(raw.parse().id)
    assert [json.loads(line)["id"] for line in export.text.splitlines()] == [conversation_id]
    assert strangers_list["results"] == [] and strangers_detail.status_code == 404
    assert strangers_export.text == ""


async def test_a_call_goes_on_in_a_conversation_of_the_callers(
    gateway: Callable[..., Gateway], alice_key: str
) -> None:
    server = gateway(CHAT_SCRIPTED_TOKENS=3)
    client = server.client(alice_key)
    raw = await client.chat.completions.with_raw_response.create(
        model="default", messages=[{"role": "user", "content": "First"}]
    )
    conversation_id = raw.headers["x-chatsite-conversation"]
    # The stored conversation is the history: what the request repeats of it is not added again.
    second = await client.chat.completions.create(
        model="default",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "First"},
            {"role": "assistant", "content": full_reply(3)},
            {"role": "user", "content": "Second"},
        ],
        extra_headers={"X-Chatsite-Conversation": conversation_id},
    )

    record = await server.engine_record(request_id_of(second.id))
    assert record["messages"] == [
        ["system", "Be brief."],
        ["user", "First"],
        ["assistant", full_reply(3)],
        ["user", "Second"],
    ]
    conversation = await database_sync_to_async(Conversation.objects.get)(pk=conversation_id)
    rows = await database_sync_to_async(list)(conversation.messages.order_by("created_at", "id"))
    assert [(m.role, m.content) for m in rows] == [
        ("user", "First"),
        ("assistant", full_reply(3)),
        ("user", "Second"),
        ("assistant", full_reply(3)),
    ]
    assert rows[2].parent_id == rows[1].pk and conversation.current_leaf_id == rows[3].pk
    # The system message was this reply's only: the conversation keeps its own.
    assert rows[3].system_prompt == "Be brief." and conversation.system_prompt is None


async def test_models_lists_the_callers_models_only(
    gateway: Callable[..., Gateway], alice: Any, alice_key: str, charlie: Any, charlie_key: str
) -> None:
    reviewers = await database_sync_to_async(Group.objects.create)(name="reviewers")
    await database_sync_to_async(charlie.groups.add)(reviewers)
    server = gateway(CHAT_MODELS=json.dumps(MODELS))

    alices = await server.client(alice_key).models.list()
    charlies = await server.client(charlie_key).models.list()

    assert [m.id for m in alices.data] == ["quick", "careful"]
    assert [m.id for m in charlies.data] == ["quick", "careful", "internal"]
    assert alices.data[0].object == "model" and alices.data[0].owned_by == "chatsite"
    assert (await server.client(charlie_key).models.retrieve("internal")).id == "internal"
    with pytest.raises(openai.NotFoundError):
        await server.client(alice_key).models.retrieve("internal")
    with pytest.raises(openai.NotFoundError):
        await server.client(alice_key).chat.completions.create(
            model="internal", messages=[{"role": "user", "content": "Hi"}]
        )
    # The model picked is the one that answers, with its own defaults.
    quick = await server.client(alice_key).chat.completions.create(
        model="quick", messages=[{"role": "user", "content": "Hi"}]
    )
    assert quick.model == "quick" and quick.choices[0].message.content == full_reply(5)


async def test_a_deployment_can_keep_no_transcripts(
    gateway: Callable[..., Gateway], alice: Any, alice_key: str
) -> None:
    server = gateway(CHAT_GATEWAY_RECORD=0, CHAT_SCRIPTED_TOKENS=6, CHAT_METRICS_TOKEN="m")
    client = server.client(alice_key)
    whole = await client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": "Forget me"}]
    )
    stream = await client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": "Me too"}], stream=True
    )
    streamed = "".join([c.choices[0].delta.content or "" async for c in stream])
    assert whole.choices[0].message.content == streamed == full_reply(6)

    async def nothing_kept() -> bool:
        exists = Conversation.objects.filter(owner=alice).exists
        return not await database_sync_to_async(exists)()

    assert await eventually(nothing_kept)
    # Only the metrics remain.
    async with httpx.AsyncClient(base_url=server.origin) as http:
        metrics = await http.get("/metrics", headers={"Authorization": "Bearer m"})
    assert 'chatsite_tokens_generated_total{engine="scripted",status="complete"} 12.0' in (
        metrics.text
    )
    # Nothing to go on in.
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(
            model="default",
            messages=[{"role": "user", "content": "Hi"}],
            extra_headers={"X-Chatsite-Conversation": "00000000-0000-0000-0000-000000000000"},
        )
    assert refused.value.code == "recording_off"
