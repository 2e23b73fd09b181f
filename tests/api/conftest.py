"""alice's API clients and history, shared by the API's test modules."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from conversations.models import Conversation
from conversations.services.tokens import api_token_create
from tests.support.history import add_exchange


@pytest.fixture
def history(conversation: Conversation) -> Conversation:
    """alice's conversation: a complete reply, a reply she stopped and one that failed."""
    add_exchange(conversation, "What is a socket?")
    stopped_at = timezone.now()
    add_exchange(
        conversation,
        "Tell me a long story",
        content="Once upon a",
        status="cancelled",
        completion_tokens=3,
        finish_reason="abort",
        cancelled_by="alice",
        cancel_requested_at=stopped_at,
        cancel_confirmed_at=stopped_at + timedelta(milliseconds=12),
        cancel_latency_ms=12.0,
    )
    add_exchange(
        conversation,
        "And now?",
        content="",
        status="error",
        error="engine crashed",
        finish_reason="",
    )
    return conversation


@pytest.fixture
def token_key(alice: Any) -> str:
    return api_token_create(user=alice, name="tests")[1]


@pytest.fixture
def api(token_key: str) -> Client:
    """alice's API client, authenticated with her token."""
    return Client(headers={"Authorization": f"Bearer {token_key}"})


@pytest.fixture
def charlie_api(charlie: Any) -> Client:
    return Client(
        headers={"Authorization": f"Bearer {api_token_create(user=charlie, name='c')[1]}"}
    )
