"""The sidebar loads a page of conversations at a time, so thousands of them stay a small page."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from conversations.models import Conversation, Message
from conversations.pages.chat import SIDEBAR_PAGE_SIZE
from conversations.templatetags.chat import date_group_on

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def many(alice: Any) -> list[Conversation]:
    conversations = Conversation.objects.bulk_create(
        Conversation(owner=alice, title=f"chat number {i}")
        for i in range(SIDEBAR_PAGE_SIZE * 2 + 7)
    )
    Message.objects.bulk_create(
        Message(conversation=c, role="user", content="hello") for c in conversations
    )
    return conversations


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


def test_conversations_opened_and_left_empty_do_not_pile_up(alice: Any, many: Any) -> None:
    browser = Client()
    browser.force_login(alice)
    opened = browser.post(reverse("conversation-new"))
    empty = Conversation.objects.get(pk=opened.url.split("/")[-2])
    assert not empty.messages.exists()
    again = browser.post(reverse("conversation-new"))
    assert again.url == opened.url, "New conversation reuses the empty one"
    assert Conversation.objects.filter(owner=alice).count() == len(many) + 1

    shown = browser.get(empty.get_absolute_url()).content.decode()
    assert f'id="conversation-link-{empty.pk}"' in shown, "the open one is listed, marked"
    assert 'aria-current="page"' in shown
    elsewhere = browser.get(many[0].get_absolute_url()).content.decode()
    assert f'id="conversation-link-{empty.pk}"' not in elsewhere, "an empty one left behind is not"


def test_the_sidebar_groups_conversations_by_date(alice: Any) -> None:
    now = timezone.now()
    for title, age in [("fresh", 0), ("yesterday's", 1), ("this week's", 3), ("old", 800)]:
        conversation = Conversation.objects.create(owner=alice, title=title)
        Message.objects.create(conversation=conversation, role="user", content="hi")
        Conversation.objects.filter(pk=conversation.pk).update(updated_at=now - timedelta(days=age))
    browser = Client()
    browser.force_login(alice)
    page = browser.get(reverse("conversation-list")).content.decode()
    order = [
        page.index(text)
        for text in (
            "Today",
            "fresh",
            "Yesterday",
            "yesterday&#x27;s",
            "Previous 7 days",
            "this week&#x27;s",
            f">{timezone.localdate(now - timedelta(days=800)).year}<",
            ">old<",
        )
    ]
    assert order == sorted(order)
    assert page.count(">Today<") == 1


@pytest.mark.parametrize(
    ("day", "heading"),
    [
        (date(2026, 6, 15), "Today"),
        (date(2026, 6, 14), "Yesterday"),
        (date(2026, 6, 9), "Previous 7 days"),
        (date(2026, 5, 17), "Previous 30 days"),
        (date(2026, 5, 16), "May"),
        (date(2026, 1, 1), "January"),
        (date(2025, 12, 31), "2025"),
        (date(2019, 7, 4), "2019"),
    ],
)
def test_older_history_is_grouped_by_month_this_year_then_by_year(day: date, heading: str) -> None:
    assert date_group_on(day, today=date(2026, 6, 15)) == heading


def test_a_date_heading_is_not_repeated_on_the_next_page(alice: Any, many: Any) -> None:
    browser = Client()
    browser.force_login(alice)
    first = browser.get(reverse("conversation-list")).content.decode()
    assert first.count(">Today<") == 1 and "after=Today" in first
    second = browser.get(reverse("conversation-sidebar"), {"page": 2, "after": "Today"})
    assert ">Today<" not in second.content.decode()


def test_a_named_empty_conversation_is_not_offered_as_new(alice: Any) -> None:
    named = Conversation.objects.create(owner=alice, title="Plans for later")
    browser = Client()
    browser.force_login(alice)
    response = browser.post(reverse("conversation-new"))
    assert response.url != named.get_absolute_url()
