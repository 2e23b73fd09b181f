"""Problem 4 in a real browser: models in the page.

A model added in the admin from a list of backends, its key stored encrypted, its connection
tested and its model picked from the server's list (the server is this same daphne's own
OpenAI-compatible gateway), then answering alice without a restart; replies labelled with the
model's name; one picker in the composer that the "Model and settings" summary follows; the
settings panel and the account's defaults saved in place with a confirmation or inline errors.

The server, its database, the browser and alice's login are test_browser.py's fixtures, made
this module's; its models are declared in os.environ before the server copies it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.pages import test_browser
from tests.pages.test_browser import Server, home, new_conversation, send
from tests.pages.test_page_ux_browser import serious_violations

pytestmark = pytest.mark.browser

server = test_browser.server
browser = test_browser.browser
alice_session = test_browser.alice_session
alice = test_browser.alice

MODELS = [
    {"slug": "scripted", "name": "Scripted", "backend": "scripted", "options": {"tokens": 12}},
    {
        "slug": "second",
        "name": "Second scripted",
        "backend": "scripted",
        "options": {"tokens": 8},
        "system_prompt": "You are the second.",
    },
]
ROOT_PASSWORD = "root-password"

# Runs in the server's environment: a superuser, and an API token of alice's for the gateway.
SETUP_SCRIPT = """
import json, django
django.setup()
from django.contrib.auth import get_user_model
from conversations.services.tokens import api_token_create
User = get_user_model()
if not User.objects.filter(username="root").exists():
    User.objects.create_superuser("root", "root@example.com", "root-password")
key = api_token_create(user=User.objects.get(username="alice"), name="upstream")[1]
print(json.dumps({"key": key}))
"""
# Runs in the server's environment: a model's key column as stored, and what it decrypts to.
RAW_KEY_SCRIPT = """
import json, sys, django
django.setup()
from django.db import connection
from conversations.models.encryption import decrypt
with connection.cursor() as cursor:
    cursor.execute("SELECT api_key_encrypted FROM conversations_chatmodel WHERE slug = %s", [sys.argv[1]])
    (raw,) = cursor.fetchone()
print(json.dumps({"raw": raw, "plain": decrypt(raw)}))
"""
# Runs in the server's environment: what a conversation's replies were written with.
REPLIES_SCRIPT = """
import json, sys, django
django.setup()
from conversations.models import Message
replies = Message.objects.filter(conversation_id=sys.argv[1], role="assistant")
print(json.dumps(list(replies.order_by("created_at").values("status", "model_slug", "system_prompt"))))
"""


@pytest.fixture(scope="module", autouse=True)
def declared_models() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CHAT_MODELS", json.dumps(MODELS))
        yield


@pytest.fixture
def root(browser: Browser, server: Server) -> Iterator[tuple[BrowserContext, str]]:
    """A superuser signed in to the admin, and alice's API key for the gateway."""
    key = server.run_script(SETUP_SCRIPT)["key"]
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    page = context.new_page()
    page.goto(f"{server.base}/admin/login/")
    page.fill("#id_username", "root")
    page.fill("#id_password", ROOT_PASSWORD)
    page.locator("input[type=submit]").click()
    expect(page).to_have_url(f"{server.base}/admin/")
    page.close()
    yield context, key
    context.close()


def conversation_id(page: Page) -> str:
    return page.locator("section.chat").get_attribute("data-conversation") or ""


def mark_the_page(page: Page) -> None:
    """A mark that a page load would wipe: a check that what follows happened in place."""
    page.evaluate("window.notReloaded = true")


def assert_not_reloaded(page: Page) -> None:
    assert page.evaluate("window.notReloaded === true"), "the page was loaded again"


def send_and_wait(page: Page, text: str) -> None:
    replies = page.locator("#messages .message.assistant")
    before = replies.count()
    send(page, text)
    expect(replies).to_have_count(before + 1)
    expect(replies.last).to_have_attribute("data-status", "complete", timeout=30_000)


def test_problem_4_the_admin_adds_a_model_from_the_server_s_list_without_a_restart(
    server: Server, root: tuple[BrowserContext, str], alice: BrowserContext
) -> None:
    admin, key = root
    page = admin.new_page()
    page.goto(f"{server.base}/admin/conversations/chatmodel/add/")
    page.fill("#id_name", "Through the gateway")
    page.fill("#id_slug", "gateway")
    expect(page.locator("#connection-test")).to_be_hidden()  # the first backend runs here
    page.locator("#id_backend").select_option("openai")  # a list, not free text
    expect(page.get_by_role("button", name="Test connection")).to_be_visible()
    page.fill("#id_base_url", f"{server.base}/v1")
    result = page.locator("#connection-result")

    page.fill("#id_api_key", "not-the-key")
    page.get_by_role("button", name="Test connection").click()
    expect(result).to_contain_text("HTTP 401")

    page.fill("#id_api_key", key)
    page.get_by_role("button", name="Test connection").click()
    expect(result).to_have_text(re.compile(r"^Connected: \d+ models?$"))
    offered = page.locator("#server-models option")
    expect(offered.first).to_be_attached()
    assert "scripted" in [o.get_attribute("value") for o in offered.all()]
    expect(page.locator("#id_model_id")).to_have_attribute("list", "server-models")
    page.fill("#id_model_id", "scripted")
    page.locator("input[name=_save]").click()
    expect(page.locator(".messagelist")).to_contain_text("Through the gateway")

    stored = server.run_script(RAW_KEY_SCRIPT, "gateway")
    assert stored["raw"] and key not in stored["raw"], "the column holds ciphertext"
    assert stored["plain"] == key
    page.locator("a", has_text="Through the gateway").first.click()
    expect(page.locator("#id_api_key")).to_have_value("")  # never shown back
    assert key not in page.content()

    # Alice picks it at once (no restart) and it answers, through the server's own gateway.
    chat = home(alice, server.base)
    new_conversation(chat)
    chat.locator("#send-form select.model-picker").select_option("gateway")
    expect(chat.locator(".settings-model")).to_have_text("Through the gateway")
    send_and_wait(chat, "Hello through the gateway")
    label = chat.locator("#messages .message.assistant .model-name").last
    expect(label).to_have_text("· Through the gateway")


def test_problem_4_every_reply_is_labelled_with_the_model_s_name(
    server: Server, alice: BrowserContext
) -> None:
    page = home(alice, server.base)
    new_conversation(page)
    page.locator("#send-form select.model-picker").select_option("second")
    expect(page.locator(".settings-model")).to_have_text("Second scripted")
    send_and_wait(page, "Who answers?")
    label = page.locator("#messages .message.assistant .model-name").last
    expect(label).to_have_text("· Second scripted")
    expect(label).to_have_attribute("data-model", "second")
    page.reload()
    expect(page.locator("#messages .message.assistant .model-name").last).to_have_text(
        "· Second scripted"
    )


def test_problem_4_the_summary_follows_the_one_picker_in_the_composer(
    server: Server, alice: BrowserContext
) -> None:
    page = home(alice, server.base)
    new_conversation(page)
    picker = page.locator("#send-form select.model-picker")
    summary = page.locator("details.chat-settings .settings-model")
    expect(page.locator("details.chat-settings select")).to_have_count(0)  # one control only
    other = "second" if picker.input_value() == "scripted" else "scripted"
    name = {"scripted": "Scripted", "second": "Second scripted"}[other]
    mark_the_page(page)

    picker.select_option(other)
    expect(summary).to_have_text(name)
    expect(summary).to_have_attribute("data-model", other)
    page.locator("details.chat-settings > summary").click()
    expect(page.locator("details.chat-settings input[name=model]")).to_have_value(other)
    assert_not_reloaded(page)

    page.reload()
    expect(picker).to_have_value(other)
    expect(summary).to_have_text(name)


def test_problem_4_settings_save_in_place_with_a_confirmation_and_inline_errors(
    server: Server, alice: BrowserContext
) -> None:
    page = home(alice, server.base)
    new_conversation(page)
    page.locator("details.chat-settings > summary").click()
    mark_the_page(page)
    temperature = page.locator("details.chat-settings input[name=temperature]")
    temperature.fill("5")
    page.get_by_role("button", name="Save settings").click()

    expect(temperature).to_have_attribute("aria-invalid", "true")
    error = page.locator("#" + (temperature.get_attribute("aria-describedby") or "missing"))
    expect(error).to_contain_text("takes a temperature from 0 to 2")
    expect(page.locator(".settings-saved")).to_have_text("")
    assert_not_reloaded(page)
    assert serious_violations(page) == []

    temperature.fill("0.5")
    page.get_by_role("button", name="Save settings").click()
    expect(page.get_by_role("status").filter(has_text="Saved")).to_be_visible()
    expect(temperature).not_to_have_attribute("aria-invalid", "true")
    assert_not_reloaded(page)
    page.reload()
    expect(page.locator("details.chat-settings input[name=temperature]")).to_have_value("0.5")


def test_problem_4_per_user_default_instructions_and_model(
    server: Server, alice: BrowserContext
) -> None:
    instructions = "Answer like a lighthouse keeper."
    page = home(alice, server.base)
    page.goto(f"{server.base}/account/")
    mark_the_page(page)
    defaults = page.locator("#conversation-defaults")
    defaults.locator("select[name=default_model]").select_option("second")
    defaults.locator("textarea[name=default_instructions]").fill(instructions)
    defaults.get_by_role("button", name="Save defaults").click()
    expect(page.locator("#conversation-defaults").get_by_role("status")).to_have_text("Saved")
    assert_not_reloaded(page)
    assert serious_violations(page) == []

    try:
        chat = home(alice, server.base)
        new_conversation(chat)
        expect(chat.locator("#send-form select.model-picker")).to_have_value("second")
        chat.locator("details.chat-settings > summary").click()
        expect(chat.locator("details.chat-settings textarea[name=system_prompt]")).to_have_value(
            instructions
        )
        send_and_wait(chat, "Where are you?")
        (reply,) = server.run_script(REPLIES_SCRIPT, conversation_id(chat))
        assert reply == {
            "status": "complete",
            "model_slug": "second",
            "system_prompt": instructions,
        }
    finally:  # the module's other tests start from the site's defaults
        page.goto(f"{server.base}/account/")
        defaults = page.locator("#conversation-defaults")
        defaults.locator("select[name=default_model]").select_option("")
        defaults.locator("textarea[name=default_instructions]").fill("")
        defaults.get_by_role("button", name="Save defaults").click()
        expect(page.locator("#conversation-defaults").get_by_role("status")).to_have_text("Saved")


def test_problem_4_settings_still_save_without_javascript(
    server: Server, browser: Browser, alice_session: str
) -> None:
    context = browser.new_context(java_script_enabled=False, storage_state=alice_session)
    try:
        page = context.new_page()
        page.goto(f"{server.base}/account/")
        page.locator("textarea[name=default_instructions]").fill("")
        page.get_by_role("button", name="Save defaults").click()
        expect(page).to_have_url(f"{server.base}/account/")
        expect(page.get_by_role("heading", name="Defaults for new conversations")).to_be_visible()
    finally:
        context.close()
