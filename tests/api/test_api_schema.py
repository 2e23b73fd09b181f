"""Schemathesis drives the API in-process from its own OpenAPI schema, looking for server errors.

Half the generated requests aim at one of alice's real conversations, so the endpoints are
exercised past their 404, with generated query strings (q, since, until, page, format).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from conversations.models import Conversation, Message
from conversations.services.tokens import api_token_create

# Small on purpose: the suite runs on shared cores; this covers each operation a few dozen times.
EXAMPLES = 60


@pytest.fixture
def schema(db: Any, settings: Any) -> Iterator[Any]:
    settings.CHAT_API_DOCS_PUBLIC = True  # schemathesis reads the schema without signing in
    # As Django's own test client does: a request must not close the connection that holds the
    # test's transaction (on PostgreSQL the test would lose its database mid-run).
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        # The gateway (/v1/) streams through the ASGI server: tests/gateway drives it live.
        yield schemathesis.openapi.from_wsgi(
            "/api/schema/?format=json", get_wsgi_application()
        ).include(path_regex="^/api/")
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


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
        ("POST", "/api/imports/"),
        ("GET", "/api/models/"),
    }


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_it_finds_no_server_error(schema: Any, alice: Any, mode: GenerationMode) -> None:
    headers = {"Authorization": f"Bearer {api_token_create(user=alice, name='fuzz')[1]}"}
    kept = alice_conversation(alice)
    # Valid requests must also answer as the schema documents them; invalid ones only must not crash.
    checks: list[Any] = [not_a_server_error]
    if mode is GenerationMode.POSITIVE:
        checks += [status_code_conformance, content_type_conformance, response_schema_conformance]

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=schema.as_strategy(generation_mode=mode), aim_at_real=st.booleans())
    def run(case: Any, aim_at_real: bool) -> None:
        if aim_at_real and "conversation_id" in (case.path_parameters or {}):
            # A DELETE gets a conversation of its own, so the other requests still find theirs.
            target = alice_conversation(alice) if case.method == "DELETE" else kept
            case.path_parameters["conversation_id"] = str(target.pk)
        response = case.call(headers=headers)
        case.validate_response(response, checks=checks, headers=headers)

    run()


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
