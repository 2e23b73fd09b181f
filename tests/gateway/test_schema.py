"""The gateway in the OpenAPI schema, held to what the live server does: schemathesis drives the
gateway's operations on a live daphne from the schema served at /api/schema/, and every answer
must be one the schema documents (valid requests) or at least not a server error (invalid ones).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
import schemathesis
from django.test import Client
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.gateway.conftest import Gateway
from tests.support.servers import NEEDS_SHARED_SERVICES

EXAMPLES = 40  # each valid call writes a reply: small, the suite shares its cores
GATEWAY_OPERATIONS = {
    ("POST", "/v1/chat/completions"),
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
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
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
    raw = httpx.get(f"{server.origin}/api/schema/", params={"format": "json"}, headers=headers)
    schema = schemathesis.openapi.from_dict(raw.json()).include(path_regex="^/v1/")
    schema.config.update(base_url=server.origin)
    # Valid requests must also answer as documented; invalid ones only must not crash.
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
        if aim_at_real and isinstance(case.body, dict):
            # The generated sampling, stream and stop options on a question that gets a reply.
            case.body.update(model="default", messages=[{"role": "user", "content": "Hello"}])
            case.headers.pop("X-Chatsite-Conversation", None)
        if aim_at_real and "model" in (case.path_parameters or {}):
            case.path_parameters["model"] = "default"
        response = case.call(headers=headers, timeout=20)
        case.validate_response(response, checks=checks, headers=headers)

    run()
