"""One schemathesis harness: generated requests from the OpenAPI schema chatsite serves at
/api/schema/, each answer held to it. The REST API is driven in-process (tests/api), the
gateway on a live server (tests/gateway).

Valid requests (GenerationMode.POSITIVE) must answer as the schema documents them; invalid ones
(NEGATIVE) only must not be server errors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
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

MODES = [GenerationMode.POSITIVE, GenerationMode.NEGATIVE]
SCHEMA_PATH = "/api/schema/"


@contextmanager
def in_process_schema(*, path_regex: str) -> Iterator[Any]:
    """The operations matching `path_regex`, called through WSGI in this process: in the
    test's transaction, so the test's rows are what they read."""
    # As Django's own test client does: a request must not close the connection that holds the
    # test's transaction (on PostgreSQL the test would lose its database mid-run).
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi(
            f"{SCHEMA_PATH}?format=json", get_wsgi_application()
        ).include(path_regex=path_regex)
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def live_schema(origin: str, *, headers: dict[str, str], path_regex: str) -> Any:
    """The operations matching `path_regex` of the server at `origin`, called over HTTP."""
    raw = httpx.get(f"{origin}{SCHEMA_PATH}", params={"format": "json"}, headers=headers)
    schema = schemathesis.openapi.from_dict(raw.json()).include(path_regex=path_regex)
    schema.config.update(base_url=origin)
    return schema


def checks_for(mode: GenerationMode) -> list[Any]:
    """What every answer is held to: valid requests also to the schema's statuses, content
    types and bodies."""
    checks: list[Any] = [not_a_server_error]
    if mode is GenerationMode.POSITIVE:
        checks += [status_code_conformance, content_type_conformance, response_schema_conformance]
    return checks


def fuzz(
    schema: Any,
    *,
    mode: GenerationMode,
    examples: int,
    headers: dict[str, str],
    aim_at_real: Callable[[Any], None],
    **call_options: Any,
) -> None:
    """Call the schema's operations with `examples` generated requests of `mode`, as the caller
    `headers` authenticate, and validate every answer (checks_for).

    About half the requests first go through `aim_at_real(case)`, which points them at real
    data (a conversation, a model), so the endpoints are exercised past their 404. Hypothesis
    runs derandomized, with no example database: the same requests on every run.
    """
    checks = checks_for(mode)

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=schema.as_strategy(generation_mode=mode), aimed=st.booleans())
    def run(case: Any, aimed: bool) -> None:
        if aimed:
            aim_at_real(case)
        response = case.call(headers=headers, **call_options)
        case.validate_response(response, checks=checks, headers=headers)

    run()
