"""Projects, pins and the archive in a real browser.

A project made in its page starts its conversations with its model and system prompt, and the
reply is written with them (as the reply's row records what the generation sent the engine);
Pin and Archive move a conversation in the sidebar, and a reload keeps it there; a drag onto a
project moves a conversation into it. The server, its database, the browser and alice's login
are test_browser.py's fixtures; this module declares two scripted models in their environment.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.pages import test_browser
from tests.pages.test_browser import Server, home, new_conversation, send

pytestmark = pytest.mark.browser

server = test_browser.server
browser = test_browser.browser
alice_session = test_browser.alice_session
alice = test_browser.alice

MODELS = [
    {"slug": "plain", "name": "Plain", "backend": "scripted", "options": {"tokens": 6}},
    {"slug": "chef", "name": "Chef", "backend": "scripted", "options": {"tokens": 6}},
]
SYSTEM_PROMPT = "You are a ship's cook.\nAnswer in one short sentence."

# Runs in the server's environment: what each reply of a conversation recorded, and the
# conversation's project.
REPLIES_SCRIPT = """
import json, sys, django
django.setup()
from conversations.models import Conversation, Message
conversation = Conversation.objects.get(pk=sys.argv[1])
replies = Message.objects.filter(conversation=conversation, role="assistant").order_by("id")
fields = ("status", "model_slug", "system_prompt", "temperature", "max_tokens")
print(json.dumps({
    "project": conversation.project.name if conversation.project else None,
    "replies": list(replies.values(*fields)),
}))
"""


@pytest.fixture(scope="module", autouse=True)
def declared_models() -> Iterator[None]:
    # Autouse, so it runs before the module's `server` copies os.environ into daphne's env.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CHAT_MODELS", json.dumps(MODELS))
        yield


def conversation_id(page: Page) -> str:
    return page.locator("section.chat").get_attribute("data-conversation") or ""


def stored(server: Server, conversation: str) -> dict[str, Any]:
    return dict(server.run_script(REPLIES_SCRIPT, conversation))


def chat_with_reply(page: Page, text: str) -> str:
    new_conversation(page)
    send(page, text)
    reply = page.locator("#messages .message.assistant").last
    expect(reply).to_have_attribute("data-status", "complete")
    return conversation_id(page)


def test_a_project_s_new_conversation_is_answered_with_its_model_and_prompt(
    server: Server, alice: BrowserContext
) -> None:
    page = home(alice, server.base)
    page.get_by_role("link", name="New project…").click()
    form = page.locator("form.project-form")
    form.locator("input[name=name]").fill("Galley")
    form.locator("select[name=model]").select_option("chef")
    form.locator("textarea[name=system_prompt]").fill(SYSTEM_PROMPT)
    form.locator("input[name=temperature]").fill("0.25")
    form.get_by_role("button", name="Create project").click()
    expect(page.locator("h1")).to_have_text("Galley")
    expect(page.locator("#project-list")).to_contain_text("Galley")

    page.get_by_role("button", name="New conversation in Galley").click()
    expect(page.locator("section.chat[data-socket=open]")).to_be_visible()
    expect(page.locator("#send-form select.model-picker")).to_have_value("chef")
    page.locator("details.chat-settings > summary").click()
    expect(page.locator("details.chat-settings textarea[name=system_prompt]")).to_have_value(
        SYSTEM_PROMPT
    )
    send(page, "What is for dinner?")
    expect(page.locator("#messages .message.assistant").last).to_have_attribute(
        "data-status", "complete"
    )

    record = stored(server, conversation_id(page))
    assert record["project"] == "Galley"
    (reply,) = record["replies"]
    assert (reply["status"], reply["model_slug"], reply["system_prompt"]) == (
        "complete",
        "chef",
        SYSTEM_PROMPT,
    ), reply
    assert reply["temperature"] == 0.25, reply
    # The project's page lists it; the sidebar's list by date does not.
    page.locator("#project-list").get_by_role("link", name="Galley").click()
    expect(page.locator(".project-conversations")).to_contain_text("What is for dinner?")
    expect(page.locator("#conversation-list")).not_to_contain_text("What is for dinner?")


def test_pin_and_archive_move_a_conversation_in_the_sidebar_and_survive_a_reload(
    server: Server, alice: BrowserContext
) -> None:
    page = home(alice, server.base)
    chat_with_reply(page, "Pin me please")
    chat_with_reply(page, "Archive me please")
    dated = page.locator("#conversation-list")
    expect(dated).to_contain_text("Pin me please")

    # Pin from the sidebar row's menu.
    row = dated.locator("li[data-conversation]", has_text="Pin me please")
    row.locator("details.row-menu > summary").click()
    row.get_by_role("button", name="Pin").click()
    pinned = page.locator("#pinned-list")
    expect(pinned).to_contain_text("Pin me please")
    expect(dated).not_to_contain_text("Pin me please")
    page.reload()
    expect(page.locator("#pinned-list")).to_contain_text("Pin me please")
    expect(page.locator("#conversation-list")).not_to_contain_text("Pin me please")

    # Archive from the conversation's own menu.
    page.locator("#conversation-list").get_by_role("link", name="Archive me please").click()
    page.locator("details.conversation-menu > summary").click()
    page.locator("details.conversation-menu").get_by_role("button", name="Archive").click()
    restore = page.locator("details.conversation-menu button", has_text="Restore from the archive")
    expect(restore).to_be_attached()  # in the menu, closed again by the page's reload
    expect(page.locator("#sidebar")).not_to_contain_text("Archive me please")
    page.reload()
    expect(page.locator("#sidebar")).not_to_contain_text("Archive me please")
    page.locator("#sidebar").get_by_role("link", name="Archive", exact=True).click()
    expect(page.locator("#archive-list")).to_contain_text("Archive me please")
    expect(page.locator("#pinned-list")).to_contain_text("Pin me please")


def test_a_drag_onto_a_project_moves_a_conversation_into_it(
    server: Server, alice: BrowserContext
) -> None:
    page = home(alice, server.base)
    page.get_by_role("link", name="New project…").click()
    page.locator("form.project-form input[name=name]").fill("Drafts")
    page.get_by_role("button", name="Create project").click()
    expect(page.locator("h1")).to_have_text("Drafts")
    page.goto(f"{server.base}/")
    conversation = chat_with_reply(page, "Drag me along")

    row = page.locator("#conversation-list li[data-conversation]", has_text="Drag me along")
    row.drag_to(page.locator("#project-list li", has_text="Drafts"))

    expect(page.locator("#conversation-list")).not_to_contain_text("Drag me along")
    assert stored(server, conversation)["project"] == "Drafts"


def test_a_drag_from_a_project_s_page_onto_the_list_by_date_takes_it_out(
    server: Server, alice: BrowserContext
) -> None:
    page = home(alice, server.base)
    page.get_by_role("link", name="New project…").click()
    page.locator("form.project-form input[name=name]").fill("Leaving")
    page.get_by_role("button", name="Create project").click()
    page.get_by_role("button", name="New conversation in Leaving").click()
    send(page, "Take me out")
    expect(page.locator("#messages .message.assistant").last).to_have_attribute(
        "data-status", "complete"
    )
    conversation = conversation_id(page)
    page.locator("#project-list").get_by_role("link", name="Leaving").click()

    row = page.locator(".project-conversations li", has_text="Take me out")
    row.drag_to(page.locator("#conversation-list"))

    expect(page.locator("#conversation-list")).to_contain_text("Take me out")
    expect(page.locator(".project-conversations")).not_to_contain_text("Take me out")
    assert stored(server, conversation)["project"] is None
