"""The admin's tests' shared fixtures: alice's history beside bob's, and staff clients."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from django.utils import timezone

from conversations.models import Conversation, Message


@pytest.fixture
def history(alice: Any, users: dict[str, Any]) -> Conversation:
    """alice's conversation with one complete reply and one she stopped; bob has another."""
    conversation = Conversation.objects.create(owner=alice, title="Alice's chat")
    Message.objects.create(conversation=conversation, role="user", content="Explain sockets")
    Message.objects.create(
        conversation=conversation,
        role="assistant",
        content="A socket is an endpoint.",
        engine="scripted",
        model="scripted-1",
        prompt_tokens=10,
        completion_tokens=5,
    )
    Message.objects.create(conversation=conversation, role="user", content="Tell me a saga")
    stopped = Message.objects.create(
        conversation=conversation,
        role="assistant",
        content="Long ago",
        status="cancelled",
        engine="scripted",
        model="scripted-1",
        prompt_tokens=20,
        completion_tokens=7,
        cancelled_by="alice",
        cancel_latency_ms=4.25,
    )
    now = timezone.now()
    Message.objects.filter(pk=stopped.pk).update(
        first_token_at=stopped.created_at + timedelta(milliseconds=80),
        finished_at=stopped.created_at + timedelta(seconds=1),
        cancel_requested_at=now,
        cancel_confirmed_at=now + timedelta(milliseconds=4.25),
    )
    bobs = Conversation.objects.create(owner=users["bob"], title="Bob's recipes")
    Message.objects.create(conversation=bobs, role="user", content="Pancakes?")
    Message.objects.create(
        conversation=bobs, role="assistant", content="Flour.", engine="openai", model="gpt"
    )
    return conversation


def staff(name: str, *permissions: str) -> Client:
    User = get_user_model()
    user = User.objects.create_user(name, f"{name}@example.com", "pw", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="conversations", codename__in=permissions)
    )
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def superuser(db: Any) -> Client:
    User = get_user_model()
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    return client


@pytest.fixture
def reviewer(db: Any) -> Client:
    """Staff with only the permission made for reading history."""
    return staff("reviewer", "view_conversation")


@pytest.fixture(params=["superuser", "reviewer"])
def admin_client(request: pytest.FixtureRequest) -> Client:
    return request.getfixturevalue(request.param)
