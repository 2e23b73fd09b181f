"""The gateway in this process, through Django's own ASGI handler (driven as a server drives it),
on whatever the suite runs on: the defaults a laptop gets (SQLite, the in-memory channel layer)
included. The live-server tests (real daphne, the real SDK) need PostgreSQL and Redis."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from asgiref.testing import ApplicationCommunicator
from channels.db import database_sync_to_async
from django.core.asgi import get_asgi_application

from conversations.models import Conversation, Message
from conversations.services import ratelimits
from conversations.services.limits import NEW_CONVERSATION
from tests.support.replies import full_reply, generations_finished, wait_until_settled

pytestmark = pytest.mark.django_db(transaction=True)

HELLO = {"model": "default", "messages": [{"role": "user", "content": "Hello"}]}
BOUND_S = 20.0  # keeps a broken handler from hanging the suite; not a speed requirement


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    parts: list[bytes] = field(default_factory=list)

    @property
    def events(self) -> list[Any]:
        lines = [line for line in b"".join(self.parts).split(b"\n\n") if line]
        return [
            json.loads(line.removeprefix(b"data: ")) for line in lines if line != b"data: [DONE]"
        ]


async def call(key: str, body: dict[str, Any], *, leave_after: int | None = None) -> Answer:
    """POST /v1/chat/completions as an ASGI server would; with `leave_after`, the client
    disconnects after that many body parts."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/chat/completions",
        "raw_path": b"/v1/chat/completions",
        "query_string": b"",
        "headers": [
            (b"host", b"testserver"),
            (b"authorization", f"Bearer {key}".encode()),
            (b"content-type", b"application/json"),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    server = ApplicationCommunicator(get_asgi_application(), scope)
    await server.send_input({"type": "http.request", "body": json.dumps(body).encode()})
    start = await server.receive_output(BOUND_S)
    headers = {name.decode().lower(): value.decode() for name, value in start["headers"]}
    answer = Answer(start["status"], headers)
    while True:
        message = await server.receive_output(BOUND_S)
        answer.parts.append(message.get("body", b""))
        if not message.get("more_body"):
            break
        if leave_after is not None and len(answer.parts) >= leave_after:
            await server.send_input({"type": "http.disconnect"})
            break
    await server.wait(BOUND_S)
    return answer


async def test_it_answers_and_streams(alice: Any, alice_key: str) -> None:
    try:
        whole = await call(alice_key, HELLO)
        streamed = await call(alice_key, {**HELLO, "stream": True})
    finally:
        await generations_finished()

    assert whole.status == 200
    assert json.loads(whole.parts[0])["choices"][0]["message"]["content"] == full_reply(40)
    assert streamed.headers["content-type"] == "text/event-stream"
    assert streamed.parts[-2:] == [b"data: [DONE]\n\n", b""]
    chunks = streamed.events
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == full_reply(40)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    rows = database_sync_to_async(
        lambda: list(
            Message.objects.filter(conversation__owner=alice, role="assistant").values_list(
                "status", "conversation__origin"
            )
        )
    )
    assert await rows() == [("complete", Conversation.Origin.API)] * 2


async def test_a_client_that_leaves_stops_the_reply(
    alice: Any, alice_key: str, settings: Any
) -> None:
    settings.CHAT_SCRIPTED_TOKENS = 2000
    try:
        answer = await call(alice_key, {**HELLO, "stream": True}, leave_after=3)
        conversation = await database_sync_to_async(Conversation.objects.get)(
            pk=answer.headers["x-chatsite-conversation"]
        )
        row = await wait_until_settled(conversation)
    finally:
        await generations_finished()
    assert row.status == Message.Status.CANCELLED and row.cancelled_by == "client_disconnect"
    assert row.cancel_latency_ms is not None and row.completion_tokens < 2000


async def test_a_caller_without_a_token_is_refused(db: Any) -> None:
    answer = await call("", HELLO)
    assert answer.status == 401
    assert json.loads(answer.parts[0])["error"]["code"] == "invalid_api_key"


async def test_finding_17_refused_calls_spend_no_conversation_budget(
    alice: Any, alice_key: str, settings: Any
) -> None:
    settings.CHAT_SENDS_PER_MINUTE = 1
    settings.CHAT_CONVERSATIONS_PER_MINUTE = 2
    settings.CHAT_SCRIPTED_TOKENS = 2
    try:
        assert (await call(alice_key, HELLO)).status == 200
        # Refused by the send rate after their conversation was counted: each is given back.
        for _ in range(3):
            refused = await call(alice_key, HELLO)
            assert refused.status == 429
            assert json.loads(refused.parts[0])["error"]["code"] == "rate_limit_exceeded"
        assert ratelimits.usage(NEW_CONVERSATION, alice.pk).count == 1
        # Refused by the conversation rate itself: not kept in the count either.
        settings.CHAT_CONVERSATIONS_PER_MINUTE = 1
        refused = await call(alice_key, HELLO)
        assert json.loads(refused.parts[0])["error"]["code"] == "too_many_conversations"
        assert ratelimits.usage(NEW_CONVERSATION, alice.pk).count == 1
    finally:
        await generations_finished()
    count = database_sync_to_async(Conversation.objects.filter(owner=alice).count)
    assert await count() == 1
