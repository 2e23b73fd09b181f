"""The conformance suite: real clients nobody here wrote (the openai Python and Node SDKs, litellm)
against one live daphne serving the gateway, every answer held to OpenAI's schema.

One server and one caller for the package: the cases agree on the server's settings, and
starting a server, or emptying the database (a transactional test's teardown, most of a short
case's time), for each case would be most of the suite's time. The caller (a user, her API key,
her signed-in session) is committed once and deleted with everything of hers at the end, and so
are the rows her calls left that outlive an account (audit events, usage counts), which other
tests count; each
case makes conversations of its own and waits for its replies to settle, so the cases pass in
any order. The server's models are scripted: `default` answers six tokens at once, `long` writes
for 40 s unless something stops it. The limits are out of the way (the limits' refusals have
their tests in tests/gateway/test_refusals.py).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.db import models

from conversations.models import AuditEvent, Conversation, FirstTokenTimes, Message, TokenUsage
from conversations.services.tokens import api_token_create
from tests.gateway.conftest import RECORDING_APP, Gateway, eventually
from tests.support import servers as live
from tests.support.replies import wait_until_settled
from tests.support.servers import open_socket, session_cookie
from tests.support.sockets import Event, LiveSocket, finished

# litellm fetches its price list when it is imported unless told to use the copy it ships.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

SHORT = 6  # tokens of a `default` reply
LONG = 2000  # tokens of a `long` one: 40 s, so only a stop ends it within a test
MAX_PROMPT_CHARS = 200
MODELS = [
    {"slug": "default", "backend": "scripted", "options": {"tokens": SHORT, "delay_ms": 2}},
    {"slug": "long", "backend": "scripted", "options": {"tokens": LONG, "delay_ms": 20}},
]
SERVER_SETTINGS: dict[str, Any] = {
    "CHAT_MODELS": json.dumps(MODELS),
    "CHAT_MAX_PROMPT_CHARS": MAX_PROMPT_CHARS,
    "CHAT_SENDS_PER_MINUTE": 100_000,
    "CHAT_CONVERSATIONS_PER_MINUTE": 100_000,
    "CHAT_FLUSH_INTERVAL_S": 0.1,
}
HELLO = [{"role": "user", "content": "Hello"}]
GO_ON = [{"role": "user", "content": "Go on"}]

# The refusals every client must raise as its own exception: the call's changes to a plain call,
# and the status, code and param of the error. A bad key is any key but the test's own.
REFUSALS: dict[str, tuple[dict[str, Any], int, str, str | None]] = {
    "too_long": (
        {"messages": [{"role": "user", "content": "x" * (MAX_PROMPT_CHARS + 1)}]},
        400,
        "too_long",
        "messages[0].content",
    ),
    "bad_key": ({}, 401, "invalid_api_key", None),
    "unknown_model": ({"model": "gpt-9"}, 404, "model_not_found", "model"),
}


@pytest.fixture(scope="package")
def conformance(
    django_db_setup: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    """The package's one server (after django_db_setup: it serves the test database)."""
    with live.servers(
        1,
        tmp_path_factory.mktemp("conformance"),
        app=RECORDING_APP,
        CACHE_KEY_PREFIX=f"conformance-{uuid.uuid4().hex}",
        **SERVER_SETTINGS,
    ) as (process,):
        yield Gateway(process)


@dataclass(frozen=True)
class Caller:
    user: Any
    key: str  # her API token
    cookie: str  # her signed-in session, for a chat tab

    def key_for(self, case: str) -> str:
        """Her key, or for the bad_key refusal one that is not a token."""
        return self.key + "x" if case == "bad_key" else self.key


# Rows kept when an account is deleted (the audit log has no foreign keys, usage keeps its
# counts): what the package adds to them is taken out again at its end.
OUTLIVING = (AuditEvent, TokenUsage, FirstTokenTimes)


@pytest.fixture(scope="package")
def caller(django_db_setup: Any, django_db_blocker: Any) -> Iterator[Caller]:
    """The package's one caller, committed so that the server sees her."""
    name = f"conformance-{uuid.uuid4().hex[:8]}"
    with django_db_blocker.unblock():
        before = {model: _last_pk(model) for model in OUTLIVING}
        user = get_user_model().objects.create_user(name, f"{name}@example.com", "password")
        key = api_token_create(user=user, name="conformance")[1]
        cookie = session_cookie(user)
    yield Caller(user, key, cookie)
    with django_db_blocker.unblock():
        user.delete()  # and her tokens and conversations
        Session.objects.filter(session_key=cookie.partition("=")[2]).delete()
        for model, last in before.items():
            # A plain queryset: the audit log's own refuses a delete (it is append-only).
            models.QuerySet(model).filter(pk__gt=last).delete()


def _last_pk(model: type[models.Model]) -> int:
    return models.QuerySet(model).aggregate(last=models.Max("pk"))["last"] or 0


async def conversation_being_written(owner: Any) -> Conversation:
    """The owner's newest conversation whose reply is being written (a non-streamed call's: its
    id comes with the answer only)."""

    def find() -> Conversation | None:
        writing = Conversation.objects.filter(
            owner=owner, messages__status__in=Message.ACTIVE_STATUSES
        )
        return writing.order_by("-created_at").first()

    found: Conversation = await eventually(database_sync_to_async(find))
    return found


async def stop_from_tab(server: Gateway, caller: Caller, conversation_id: Any) -> list[Event]:
    """The chat page's Stop: a tab of the caller's joins the conversation, sees the reply
    stream, presses Stop and waits for the reply's end. Its events."""
    async with open_socket(server.server, conversation_id, caller.cookie) as ws:
        tab = LiveSocket(ws)
        seen = await tab.receive_until(lambda event: event["type"] == "message.delta")
        await tab.send(action="cancel")
        seen += await tab.receive_until(finished)
    return seen


async def settled_reply(conversation_id: Any) -> Message:
    conversation = await database_sync_to_async(Conversation.objects.get)(pk=conversation_id)
    return await wait_until_settled(conversation)


async def assert_engine_stopped(server: Gateway, conversation_id: Any) -> Message:
    """The `long` reply was stopped and its engine heard it: it stopped writing, well before
    the end."""
    row = await settled_reply(conversation_id)
    assert row.status == Message.Status.CANCELLED
    record = await server.engine_record(row.request_id, model="long")
    assert record["stop_requested_at"] is not None and record["finished"]
    assert record["emitted"] == row.completion_tokens < LONG
    assert record["emitted_after_stop"] <= 1
    return row
