"""The gateway in the OpenAPI schema, held to what the live server does: schemathesis drives the
gateway's operations on a live daphne from the schema served at /api/schema/, and every answer
must be one the schema documents (valid requests) or at least not a server error (invalid ones).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from schemathesis import GenerationMode

from tests.gateway.conftest import Gateway
from tests.support.schema_fuzz import MODES, fuzz, live_schema
from tests.support.servers import NEEDS_SHARED_SERVICES

EXAMPLES = 40  # each valid call writes a reply: small, the suite shares its cores
GATEWAY_OPERATIONS = {
    ("POST", "/v1/chat/completions"),
    ("POST", "/v1/responses"),
    ("GET", "/v1/models"),
    ("GET", "/v1/models/{model}"),
}


def test_the_schema_and_docs_describe_the_gateway(alice: Any) -> None:
    client = Client()
    client.force_login(alice)
    schema = client.get("/api/schema/?format=json").json()

    operations = {
        (method.upper(), path)
        for path, item in schema["paths"].items()
        if path.startswith("/v1/")
        for method in item
    }
    assert operations == GATEWAY_OPERATIONS
    chat = schema["paths"]["/v1/chat/completions"]["post"]
    assert chat["security"] == [{"bearerAuth": []}]
    assert set(chat["responses"]["200"]["content"]) == {"application/json", "text/event-stream"}
    assert "Retry-After" in chat["responses"]["429"]["headers"]
    assert schema["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    assert client.get("/api/docs/").status_code == 200


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
@NEEDS_SHARED_SERVICES
@pytest.mark.parametrize("mode", MODES)
def test_the_live_gateway_answers_as_its_schema_says(
    gateway: Callable[..., Gateway], alice_key: str, mode: GenerationMode
) -> None:
    server = gateway(
        CHAT_SCRIPTED_TOKENS=3,
        CHAT_SCRIPTED_DELAY_MS=1,
        CHAT_SENDS_PER_MINUTE=100_000,
        CHAT_CONVERSATIONS_PER_MINUTE=100_000,
    )
    headers = {"Authorization": f"Bearer {alice_key}"}
    schema = live_schema(server.origin, headers=headers, path_regex="^/v1/")

    def at_a_real_reply(case: Any) -> None:
        if isinstance(case.body, dict):
            # The generated sampling, stream and stop options on a question that gets a reply.
            hello: dict[str, Any] = (
                {"input": "Hello"}
                if case.operation.path == "/v1/responses"
                else {"messages": [{"role": "user", "content": "Hello"}]}
            )
            case.body.update(model="default", **hello)
            case.headers.pop("X-Chatsite-Conversation", None)
        if "model" in (case.path_parameters or {}):
            case.path_parameters["model"] = "default"

    fuzz(
        schema,
        mode=mode,
        examples=EXAMPLES,
        headers=headers,
        aim_at_real=at_a_real_reply,
        timeout=20,
    )
