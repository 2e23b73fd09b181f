"""API calls in the admin: filtered by origin, with the client that made them; read-only."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from conversations.models import Conversation

CHANGELIST = "admin:conversations_conversation_changelist"


def test_the_admin_filters_by_origin_and_shows_the_client(alice: Any) -> None:
    api = Conversation.objects.create(
        owner=alice, title="From a script", origin="api", origin_detail="OpenAI/Python 3.57.0"
    )
    Conversation.objects.create(owner=alice, title="From the page")
    staff = Client()
    staff.force_login(get_user_model().objects.create_superuser("root", "r@example.com", "pw"))

    listed = staff.get(reverse(CHANGELIST), {"origin": "api"}).content.decode()
    detail = staff.get(reverse("admin:conversations_conversation_change", args=[api.pk]))

    assert "From a script" in listed and "From the page" not in listed
    page = detail.content.decode()
    assert "OpenAI/Python 3.57.0" in page and "API" in page
    assert 'name="origin_detail"' not in page, "read-only, like the rest of a transcript"
