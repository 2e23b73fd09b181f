"""The sidebar loads a page of conversations at a time, so thousands of them stay a small page."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from conversations.models import Conversation
from conversations.views import SIDEBAR_PAGE_SIZE

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def many(alice: Any) -> list[Conversation]:
    return Conversation.objects.bulk_create(
        Conversation(owner=alice, title=f"chat number {i}")
        for i in range(SIDEBAR_PAGE_SIZE * 2 + 7)
    )


def links(response: Any) -> int:
    return response.content.decode().count('id="conversation-link-')


def test_the_page_lists_one_page_and_offers_the_older_ones(alice: Any, many: Any) -> None:
    browser = Client()
    browser.force_login(alice)
    page = browser.get(reverse("conversation-list"))
    assert links(page) == SIDEBAR_PAGE_SIZE
    assert b"Older conversations" in page.content

    second = browser.get(reverse("conversation-sidebar"), {"page": 2})
    assert links(second) == SIDEBAR_PAGE_SIZE and b"page=3" in second.content
    last = browser.get(reverse("conversation-sidebar"), {"page": 3})
    assert links(last) == 7 and b"Older conversations" not in last.content
    detail = browser.get(reverse("conversation-detail", args=[many[0].pk]))
    assert links(detail) == SIDEBAR_PAGE_SIZE


def test_strangers_get_their_own_empty_sidebar(charlie: Any, many: Any) -> None:
    browser = Client()
    browser.force_login(charlie)
    page = browser.get(reverse("conversation-sidebar"), {"page": 2})
    assert links(page) == 0 and b"No conversations yet." in page.content
    assert Client().get(reverse("conversation-sidebar")).status_code == 302, "login first"
