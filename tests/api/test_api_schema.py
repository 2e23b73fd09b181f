"""Schemathesis drives the API in-process from its own OpenAPI schema, looking for server errors.

Half the generated requests aim at one of alice's real conversations, so the endpoints are
exercised past their 404, with generated query strings (q, since, until, page, format).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from schemathesis import GenerationMode

from conversations.models import Conversation, Message
from conversations.services.tokens import api_token_create
from tests.support.schema_fuzz import MODES, fuzz, in_process_schema

# Small on purpose: the suite runs on shared cores; this covers each operation a few dozen times.
EXAMPLES = 60


@pytest.fixture
def schema(db: Any, settings: Any) -> Iterator[Any]:
    settings.CHAT_API_DOCS_PUBLIC = True  # schemathesis reads the schema without signing in
    # The gateway (/v1/) streams through the ASGI server: tests/gateway drives it live.
    with in_process_schema(path_regex="^/api/") as schema:
        yield schema


def alice_conversation(alice: Any) -> Conversation:
    conversation = Conversation.objects.create(owner=alice, title="Fuzzed")
    Message.objects.create(conversation=conversation, role="user", content="hello")
    Message.objects.create(
        conversation=conversation,
        role="assistant",
        content="stopped reply",
        status="cancelled",
        engine="scripted",
        cancelled_by="alice",
    )
    return conversation


def test_it_describes_every_endpoint(schema: Any) -> None:
    operations = {(op.ok().method.upper(), op.ok().path) for op in schema.get_all_operations()}
    assert operations == {
        ("GET", "/api/conversations/"),
        ("GET", "/api/conversations/{conversation_id}/"),
        ("PATCH", "/api/conversations/{conversation_id}/"),
        ("DELETE", "/api/conversations/{conversation_id}/"),
        ("GET", "/api/conversations/{conversation_id}/export"),
        ("GET", "/api/conversations/{conversation_id}/shares/"),
        ("POST", "/api/conversations/{conversation_id}/shares/"),
        ("DELETE", "/api/conversations/{conversation_id}/shares/{share_id}/"),
        ("GET", "/api/export.jsonl"),
        ("GET", "/api/feedback.jsonl"),
        ("POST", "/api/imports/"),
        ("GET", "/api/models/"),
        ("GET", "/api/prompts/"),
        ("POST", "/api/prompts/"),
        ("GET", "/api/prompts/{prompt_id}/"),
        ("PATCH", "/api/prompts/{prompt_id}/"),
        ("DELETE", "/api/prompts/{prompt_id}/"),
    }


@pytest.mark.parametrize("mode", MODES)
def test_it_finds_no_server_error(schema: Any, alice: Any, mode: GenerationMode) -> None:
    headers = {"Authorization": f"Bearer {api_token_create(user=alice, name='fuzz')[1]}"}
    kept = alice_conversation(alice)

    def at_alices_conversation(case: Any) -> None:
        if "conversation_id" in (case.path_parameters or {}):
            # A DELETE gets a conversation of its own, so the other requests still find theirs.
            target = alice_conversation(alice) if case.method == "DELETE" else kept
            case.path_parameters["conversation_id"] = str(target.pk)

    fuzz(schema, mode=mode, examples=EXAMPLES, headers=headers, aim_at_real=at_alices_conversation)


def test_the_schema_and_docs_are_for_signed_in_users(alice: Any) -> None:
    from django.test import Client

    anonymous = Client()
    assert anonymous.get("/api/schema/").status_code == 401
    assert anonymous.get("/api/docs/").status_code == 401
    signed_in = Client()
    signed_in.force_login(alice)
    assert signed_in.get("/api/schema/").status_code == 200
    assert signed_in.get("/api/docs/").status_code == 200


def test_a_setting_makes_the_schema_public(db: Any, settings: Any) -> None:
    from django.test import Client

    settings.CHAT_API_DOCS_PUBLIC = True
    assert Client().get("/api/schema/").status_code == 200
