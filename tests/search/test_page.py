"""The sidebar's search, as the page asks for it (htmx) and without JavaScript, on either
database; how results are ranked is in test_postgresql.py and test_sqlite.py."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from conversations import search
from conversations.models import Conversation, Message
from tests.search.chats import chat, message

pytestmark = pytest.mark.django_db

SEARCH = reverse("conversation-search")
HTMX = {"HX-Request": "true"}


@pytest.fixture
def alice_client(client: Client, alice: Any) -> Client:
    client.force_login(alice)
    return client


def hits(page: str) -> list[str]:
    """The titles of the results in a page, in order, without their markup."""
    titles = re.findall(r'<span class="hit-title">(.*?)</span>', page, re.S)
    return [html.unescape(re.sub(r"</?mark>", "", t)) for t in titles]


def test_it_finds_titles_and_message_text_as_you_type(alice_client: Client, alice: Any) -> None:
    by_text = chat(alice, "Kitchen", "How do I feed a sourdough starter?", "Flour and water.")
    by_title = chat(alice, "Sourdough notes", "Hello")
    chat(alice, "Unrelated", "Nothing to see")

    response = alice_client.get(SEARCH, {"q": "sourdough"}, headers=HTMX)

    assert response.status_code == 200
    page = response.content.decode()
    assert sorted(hits(page)) == ["Kitchen", "Sourdough notes"]
    question = message(by_text, "How do I feed a sourdough starter?")
    assert f'href="{by_text.get_absolute_url()}#msg-{question.pk}"' in page
    assert f'href="{by_title.get_absolute_url()}"' in page  # the title alone matched
    assert "<mark>sourdough</mark>" in page.lower()
    assert "<html" not in page  # a fragment for the sidebar


def test_the_last_word_being_typed_is_a_prefix(alice_client: Client, alice: Any) -> None:
    chat(alice, "Cluster", "We run kubernetes at work")

    page = alice_client.get(SEARCH, {"q": "kubern"}, headers=HTMX).content.decode()

    assert hits(page) == ["Cluster"]


def test_an_empty_box_answers_nothing_and_the_list_comes_back(
    alice_client: Client, alice: Any
) -> None:
    chat(alice, "Kitchen", "sourdough")
    response = alice_client.get(SEARCH, {"q": "  "}, headers=HTMX)
    assert response.status_code == 200
    assert response.content == b""  # #search-results empties; CSS shows the list again


def test_it_says_when_nothing_matches(alice_client: Client, alice: Any) -> None:
    chat(alice, "Kitchen", "sourdough")
    page = alice_client.get(SEARCH, {"q": "zeppelin"}, headers=HTMX).content.decode()
    assert "No conversation matches “zeppelin”." in page
    assert hits(page) == []


def test_without_javascript_the_results_come_in_the_whole_page(
    alice_client: Client, alice: Any
) -> None:
    chat(alice, "Kitchen", "sourdough")
    chat(alice, "Garden", "tomatoes")

    response = alice_client.get(SEARCH, {"q": "sourdough"})

    page = response.content.decode()
    assert response.status_code == 200
    assert '<input id="search-box" type="search" name="q" value="sourdough"' in page
    assert hits(page) == ["Kitchen"]
    assert 'id="conversation-list"' in page and "Garden" in page  # the list, hidden by CSS
    assert alice_client.get(SEARCH, {"q": ""}).url == reverse("conversation-list")


def test_the_box_is_on_the_list_and_in_every_conversation(alice_client: Client, alice: Any) -> None:
    kitchen = chat(alice, "Kitchen", "sourdough")
    for url in (reverse("conversation-list"), kitchen.get_absolute_url()):
        page = alice_client.get(url).content.decode()
        assert 'hx-trigger="input changed delay:250ms, submit"' in page
        assert '<div id="search-results" class="search-results"></div>' in page


def test_it_escapes_hostile_text_and_marks_only_the_match(alice_client: Client, alice: Any) -> None:
    chat(
        alice,
        "<img src=x onerror=alert(1)> tricks",
        'Try <script>alert("tricks")</script> & see',
    )

    page = alice_client.get(SEARCH, {"q": "tricks"}, headers=HTMX).content.decode()

    assert "<script>" not in page and "<img" not in page
    assert "&lt;script&gt;" in page
    assert "&lt;img src=x onerror=alert(1)&gt; <mark>tricks</mark>" in page
    tags = set(re.findall(r"</?(\w+)", page.split('class="search-hits"')[1]))
    assert tags <= {"li", "a", "span", "mark", "ol", "form", "button", "input"}


def test_it_never_shows_another_users_conversations(
    client: Client, alice: Any, users: dict[str, Any], charlie: Any
) -> None:
    chat(alice, "Alice's plans", "the zeppelin leaves at noon")
    chat(users["bob"], "Bob's zeppelin", "a zeppelin of his own")

    client.force_login(charlie)
    assert hits(client.get(SEARCH, {"q": "zeppelin"}, headers=HTMX).content.decode()) == []
    client.force_login(alice)
    assert hits(client.get(SEARCH, {"q": "zeppelin"}, headers=HTMX).content.decode()) == [
        "Alice's plans"
    ]


def test_it_needs_a_login(client: Client) -> None:
    response = client.get(SEARCH, {"q": "anything"})
    assert response.status_code == 302
    assert response.url.startswith(reverse("login"))


@pytest.mark.parametrize(
    "params, error",
    [
        ({"q": "x" * 201}, "at most 200 characters"),
        ({"q": "zeppelin", "page": "0"}, "greater than or equal to 1"),
        ({"q": "zeppelin\x00"}, "Null characters are not allowed"),
    ],
)
def test_it_refuses_what_the_box_cannot_send(
    alice_client: Client, params: dict[str, str], error: str
) -> None:
    response = alice_client.get(SEARCH, params, headers=HTMX)
    assert response.status_code == 400
    assert error in response.content.decode()


def test_it_pages_the_results(alice_client: Client, alice: Any) -> None:
    for i in range(search.PAGE_SIZE + 3):
        chat(alice, f"chat {i}", f"zeppelin number {i}")

    first = alice_client.get(SEARCH, {"q": "zeppelin"}, headers=HTMX).content.decode()
    second = alice_client.get(SEARCH, {"q": "zeppelin", "page": 2}, headers=HTMX)

    assert len(hits(first)) == search.PAGE_SIZE
    assert f'hx-get="{SEARCH}?q=zeppelin&amp;page=2"' in first
    more = second.content.decode()
    assert len(hits(more)) == 3 and "More results" not in more
    assert set(hits(first)).isdisjoint(hits(more))


def test_imported_conversations_are_found(alice_client: Client, alice: Any) -> None:
    chat(
        alice,
        "From elsewhere",
        "an old question about zeppelins",
        origin=Conversation.Origin.IMPORT,
        origin_detail="chatgpt",
        external_id="abc",
    )
    page = alice_client.get(SEARCH, {"q": "zeppelin"}, headers=HTMX).content.decode()
    assert hits(page) == ["From elsewhere"]


# --- A result on another branch ---------------------------------------------------------------


@pytest.fixture
def two_versions(alice: Any) -> tuple[Conversation, Message, Message]:
    """A question with two replies; the second is shown, the first mentions the zeppelin."""
    conversation = chat(alice, "Airships", "Tell me about airships", "The zeppelin was...")
    first = message(conversation, "The zeppelin was...")
    second = Message.objects.create(
        conversation=conversation, parent=first.parent, role="assistant", content="Blimps!"
    )
    Conversation.objects.filter(pk=conversation.pk).update(current_leaf=second)
    return conversation, first, second


def test_a_result_on_another_version_opens_that_version(
    alice_client: Client, two_versions: tuple[Conversation, Message, Message]
) -> None:
    conversation, first, _ = two_versions
    page = alice_client.get(SEARCH, {"q": "zeppelin"}, headers=HTMX).content.decode()
    show = reverse("search-show-message", args=[first.pk])
    assert f'action="{show}"' in page and "In another version" in page

    response = alice_client.post(show)

    assert response.status_code == 302
    assert response.url == f"{conversation.get_absolute_url()}#msg-{first.pk}"
    conversation.refresh_from_db()
    assert conversation.current_leaf_id == first.pk
    shown = alice_client.get(conversation.get_absolute_url()).content.decode()
    assert f'id="msg-{first.pk}"' in shown


def test_a_result_on_the_version_shown_is_a_plain_link(
    alice_client: Client, two_versions: tuple[Conversation, Message, Message]
) -> None:
    conversation, _, second = two_versions
    page = alice_client.get(SEARCH, {"q": "blimps"}, headers=HTMX).content.decode()
    assert f'href="{conversation.get_absolute_url()}#msg-{second.pk}"' in page
    assert "In another version" not in page


def test_charlie_cannot_open_alices_message(
    client: Client, charlie: Any, two_versions: tuple[Conversation, Message, Message]
) -> None:
    conversation, first, second = two_versions
    client.force_login(charlie)
    assert client.post(reverse("search-show-message", args=[first.pk])).status_code == 404
    conversation.refresh_from_db()
    assert conversation.current_leaf_id == second.pk


def test_while_a_reply_is_written_the_conversation_opens_as_it_is(
    alice_client: Client, two_versions: tuple[Conversation, Message, Message]
) -> None:
    conversation, first, second = two_versions
    Message.objects.create(
        conversation=conversation, parent=second, role="assistant", status="streaming"
    )
    response = alice_client.post(reverse("search-show-message", args=[first.pk]))
    assert response.status_code == 302
    conversation.refresh_from_db()
    assert conversation.current_leaf_id == second.pk  # a reply is being written on it


def test_opening_a_result_needs_a_post(
    alice_client: Client, two_versions: tuple[Conversation, Message, Message]
) -> None:
    first = two_versions[1]
    assert alice_client.get(reverse("search-show-message", args=[first.pk])).status_code == 405
