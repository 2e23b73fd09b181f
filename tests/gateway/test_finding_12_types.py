"""Issue 23, finding 12: a list or an object where the gateway expects text (a message's `role`)
is a 400 naming the field, in OpenAI's error shape, never a 500."""

from __future__ import annotations

import json
from typing import Any

import pytest
from channels.db import database_sync_to_async

from conversations.gateway.errors import GatewayError
from conversations.gateway.wire import parse_chat_call
from conversations.models import Message
from tests.gateway.test_in_process import call
from tests.support.replies import generations_finished

NOT_TEXT = [
    pytest.param([], id="empty-list"),
    pytest.param(["user"], id="list"),
    pytest.param({}, id="empty-dict"),
    pytest.param({"role": "user"}, id="dict"),
]


def body_with_role(role: Any) -> dict[str, Any]:
    return {"model": "default", "messages": [{"role": role, "content": "Hello"}]}


@pytest.mark.parametrize("role", NOT_TEXT)
def test_finding_12_a_role_that_is_not_text_is_refused_by_name(role: Any) -> None:
    with pytest.raises(GatewayError) as refused:
        parse_chat_call(json.dumps(body_with_role(role)).encode())

    assert refused.value.status == 400
    assert refused.value.param == "messages[0].role"
    assert "must be system, developer, user, assistant or tool" in refused.value.message


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("role", NOT_TEXT)
async def test_finding_12_a_role_that_is_not_text_answers_400_not_500(
    alice_key: str, role: Any
) -> None:
    answer = await call(alice_key, body_with_role(role))

    assert answer.status == 400
    assert answer.headers["content-type"] == "application/json"
    error = json.loads(b"".join(answer.parts))["error"]
    assert (error["type"], error["param"]) == ("invalid_request_error", "messages[0].role")


def distinct_words(chars: int) -> str:
    """About `chars` characters of words that are all different: their search vector is past
    PostgreSQL's 1 MB limit on one tsvector well before `chars` is."""
    words = (f"w{n:07x}" for n in range(chars // 9 + 1))
    return " ".join(words)[:chars].rstrip()


@pytest.mark.django_db(transaction=True)
async def test_finding_12_a_history_message_past_the_index_limit_is_kept(
    alice_key: str, settings: Any
) -> None:
    settings.CHAT_GATEWAY_RECORD = True
    long_reply = distinct_words(1_200_000)
    body = {
        "model": "default",
        "messages": [
            {"role": "user", "content": "Tell me everything."},
            {"role": "assistant", "content": long_reply},
            {"role": "user", "content": "Thanks"},
        ],
        "max_tokens": 2,
    }
    try:
        answer = await call(alice_key, body)
    finally:
        await generations_finished()

    assert answer.status == 200, b"".join(answer.parts)[:300]
    saved = database_sync_to_async(
        lambda: Message.objects.filter(role="assistant", content=long_reply).count()
    )
    assert await saved() == 1
