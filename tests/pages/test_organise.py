"""Pin, archive and move a conversation from its menu or the sidebar; the sidebar's order
(projects, pinned, then by date) and the Archive page."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from conversations.models import Conversation, Message, Project
from conversations.pages.chat import SIDEBAR_PAGE_SIZE

pytestmark = [pytest.mark.django_db]


def chat(owner: Any, title: str, **fields: Any) -> Conversation:
    conversation = Conversation.objects.create(owner=owner, title=title, **fields)
    Message.objects.create(conversation=conversation, role="user", content="hello")
    return conversation


def signed_in(user: Any, **kwargs: Any) -> Client:
    browser = Client(**kwargs)
    browser.force_login(user)
    return browser


def sidebar_of(browser: Client) -> str:
    html = browser.get(reverse("conversation-list")).content.decode()
    return html[html.index('id="sidebar"') : html.index("</nav>")]


def test_it_pins_from_the_menu_and_the_pinned_head_the_sidebar(alice: Any) -> None:
    older = chat(alice, "Older plans")
    chat(alice, "Newer chat")
    before = Conversation.objects.get(pk=older.pk).updated_at
    browser = signed_in(alice)

    response = browser.post(
        reverse("conversation-pin", args=[older.pk]), {"value": "1", "next": "/"}
    )

    assert response.status_code == 302 and response.url == "/"
    older.refresh_from_db()
    assert older.pinned and older.updated_at == before, "pinning is not activity"
    sidebar = sidebar_of(browser)
    assert sidebar.index("Pinned") < sidebar.index("Older plans") < sidebar.index("Today")
    assert sidebar.index("Today") < sidebar.index("Newer chat")
    assert sidebar.count("Older plans") == 2, "its link and its row menu's label, once"
    browser.post(reverse("conversation-pin", args=[older.pk]), {"value": "0"})
    assert "Pinned" not in sidebar_of(browser)


def test_archived_conversations_leave_the_sidebar_for_the_archive_page(alice: Any) -> None:
    archived = chat(alice, "Old taxes")
    browser = signed_in(alice)
    assert "Old taxes" in sidebar_of(browser)

    browser.post(reverse("conversation-archive", args=[archived.pk]), {"value": "1"})

    assert "Old taxes" not in sidebar_of(browser)
    page = browser.get(reverse("archive")).content.decode()
    listing = page[page.index('id="archive-list"') :]
    assert "Old taxes" in listing
    browser.post(reverse("conversation-archive", args=[archived.pk]), {"value": "0"})
    assert "Old taxes" in sidebar_of(browser)
    assert "Nothing archived." in browser.get(reverse("archive")).content.decode()


def test_a_pinned_conversation_archived_leaves_the_pinned_too(alice: Any) -> None:
    chat(alice, "Pinned then archived", pinned=True, archived=True)
    assert "Pinned then archived" not in sidebar_of(signed_in(alice))


def test_the_sidebar_lists_projects_then_pinned_then_the_rest(alice: Any) -> None:
    project = Project.objects.create(owner=alice, name="Thesis")
    chat(alice, "Chapter one", project=project)
    chat(alice, "A pinned one", pinned=True)
    chat(alice, "Loose chat")

    sidebar = sidebar_of(signed_in(alice))

    assert sidebar.index("Thesis") < sidebar.index("A pinned one") < sidebar.index("Loose chat")
    assert "Chapter one" not in sidebar, "a project's conversations are listed under it"


def test_the_sidebar_reads_no_transcript_and_a_few_queries(alice: Any) -> None:
    project = Project.objects.create(owner=alice, name="Work")
    for i in range(30):
        chat(alice, f"chat {i}", pinned=i < 5, project=project if i % 7 == 0 else None)
    browser = signed_in(alice)
    with CaptureQueriesContext(connection) as queries:
        browser.get(reverse("conversation-list"))
    reads_of_messages = [q["sql"] for q in queries if "conversations_message" in q["sql"]]
    # Only the EXISTS of with_messages_or, inside the page's and its count's queries.
    assert all("EXISTS" in sql for sql in reads_of_messages), reads_of_messages
    conversation_queries = [q for q in queries if 'FROM "conversations_conversation"' in q["sql"]]
    # The page of conversations, its count, and the pinned ones.
    assert len(conversation_queries) == 3, [q["sql"] for q in conversation_queries]


def test_it_moves_a_conversation_in_and_out_of_a_project(alice: Any) -> None:
    conversation = chat(alice, "Loose")
    project = Project.objects.create(owner=alice, name="Garden")
    browser = signed_in(alice)

    browser.post(reverse("conversation-move", args=[conversation.pk]), {"project": project.pk})
    conversation.refresh_from_db()
    assert conversation.project == project
    page = browser.get(project.get_absolute_url()).content.decode()
    assert "Loose" in page[page.index("project-conversations") :]

    browser.post(reverse("conversation-move", args=[conversation.pk]), {"project": ""})
    conversation.refresh_from_db()
    assert conversation.project is None and "Loose" in sidebar_of(browser)


def test_the_conversation_menu_offers_pin_archive_and_its_projects(alice: Any) -> None:
    conversation = chat(alice, "Menu")
    Project.objects.create(owner=alice, name="Mine")
    page = signed_in(alice).get(conversation.get_absolute_url()).content.decode()
    menu = page[page.index('class="conversation-menu"') :]
    assert ">Pin<" in menu and ">Archive<" in menu
    assert ">Mine</option>" in menu


def test_nobody_else_organises_alice_s_conversations(alice: Any, charlie: Any) -> None:
    conversation = chat(alice, "Alice's")
    charlies_project = Project.objects.create(owner=charlie, name="Charlie's")
    alices_project = Project.objects.create(owner=alice, name="Alice's project")
    charlie_browser = signed_in(charlie)
    for name in ("conversation-pin", "conversation-archive"):
        url = reverse(name, args=[conversation.pk])
        assert charlie_browser.post(url, {"value": "1"}).status_code == 404
    move = reverse("conversation-move", args=[conversation.pk])
    assert charlie_browser.post(move, {"project": charlies_project.pk}).status_code == 404
    # Nor may alice put hers in charlie's project.
    mine = reverse("conversation-move", args=[conversation.pk])
    assert signed_in(alice).post(mine, {"project": charlies_project.pk}).status_code == 400
    charlies = chat(charlie, "Charlie's own")
    theirs = reverse("conversation-move", args=[charlies.pk])
    assert charlie_browser.post(theirs, {"project": alices_project.pk}).status_code == 400
    conversation.refresh_from_db()
    assert (conversation.pinned, conversation.archived, conversation.project) == (
        False,
        False,
        None,
    )
    assert "Alice&#x27;s" not in charlie_browser.get(reverse("archive")).content.decode()
    assert Client().get(reverse("archive")).status_code == 302


def test_a_sidebar_rows_buttons_pin_unpin_and_archive_the_owner_s_only(
    alice: Any, charlie: Any
) -> None:
    conversation = chat(alice, "Row")
    url = reverse("conversation-row-action")
    back = {"next": reverse("archive")}
    browser = signed_in(alice)
    assert browser.post(url, {"pin": conversation.pk, **back}).url == reverse("archive")
    conversation.refresh_from_db()
    assert conversation.pinned
    browser.post(url, {"unpin": conversation.pk})
    browser.post(url, {"archive": conversation.pk})
    conversation.refresh_from_db()
    assert (conversation.pinned, conversation.archived) == (False, True)
    # Nobody else's; a value that is no id, or no action, is refused.
    assert signed_in(charlie).post(url, {"archive": chat(alice, "Other").pk}).status_code == 404
    assert browser.post(url, {"pin": "not-an-id"}).status_code == 400
    assert browser.post(url, {"value": "1"}).status_code == 400
    assert (
        signed_in(alice, enforce_csrf_checks=True).post(url, {"pin": conversation.pk}).status_code
        == 403
    )


def test_pin_needs_a_value_and_a_csrf_token(alice: Any) -> None:
    conversation = chat(alice, "Careful")
    url = reverse("conversation-pin", args=[conversation.pk])
    assert signed_in(alice).post(url, {"value": "yes"}).status_code == 400
    assert signed_in(alice, enforce_csrf_checks=True).post(url, {"value": "1"}).status_code == 403
    assert signed_in(alice).get(url).status_code == 405
    conversation.refresh_from_db()
    assert not conversation.pinned


def test_it_goes_back_only_to_this_site(alice: Any) -> None:
    conversation = chat(alice, "Back")
    url = reverse("conversation-pin", args=[conversation.pk])
    response = signed_in(alice).post(url, {"value": "1", "next": "https://evil.example/"})
    assert response.url == conversation.get_absolute_url()


def test_old_history_is_grouped_by_month_or_year(alice: Any) -> None:
    old = chat(alice, "Ancient")
    Conversation.objects.filter(pk=old.pk).update(
        updated_at=timezone.now() - timedelta(days=3 * 365)
    )
    year = (timezone.localdate() - timedelta(days=3 * 365)).year
    sidebar = sidebar_of(signed_in(alice))
    assert sidebar.index(f">{year}<") < sidebar.index("Ancient")


def test_rows_of_a_later_sidebar_page_come_back_to_the_page_showing_them(alice: Any) -> None:
    for i in range(SIDEBAR_PAGE_SIZE + 1):
        chat(alice, f"chat {i}")
    opened = Conversation.objects.filter(owner=alice).first()
    assert opened is not None
    here = opened.get_absolute_url()
    browser = signed_in(alice)
    page = browser.get(here).content.decode()
    fragment = browser.get(
        reverse("conversation-sidebar"), {"page": 2}, headers={"HX-Request": "true"}
    ).content.decode()
    # The later page's rows are buttons of the page's one form, which comes back to the page.
    form = page[page.index('<form id="row-actions"') :]
    assert f'name="next" value="{here}"' in form[: form.index("</form>")]
    assert 'form="row-actions"' in fragment and "csrfmiddlewaretoken" not in fragment


def test_the_project_and_archive_pages_show_the_whole_sidebar(alice: Any) -> None:
    chat(alice, "Still listed")
    project = Project.objects.create(owner=alice, name="P")
    browser = signed_in(alice)
    for url in (project.get_absolute_url(), reverse("archive"), reverse("project-new")):
        page = browser.get(url).content.decode()
        assert "Still listed" in page[page.index('id="conversation-list"') :], url
