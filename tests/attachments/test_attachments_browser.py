"""Attachments in Chromium: files put in the composer by its button, a drop and a paste, sent with
a message, and read by the model: an echoing scripted engine writes back the prompt's last user
message, so the reply shows what the engine received from the PDF and the DOCX.

The server, its database, the browser and alice's login are tests/pages/test_browser.py's
fixtures; this module's models come first, before its `server` copies os.environ.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.pages import test_browser
from tests.pages.test_browser import Server, home, new_conversation, send
from tests.support import documents

pytestmark = [pytest.mark.browser]

server = test_browser.server
browser = test_browser.browser
alice_session = test_browser.alice_session
alice = test_browser.alice

MODELS = [
    {
        "slug": "echo",
        "name": "Echo",
        "backend": "scripted",
        "options": {"echo": True, "delay_ms": 5},
        "max_tokens": 400,
    },
    {
        "slug": "small",
        "name": "Small",
        "backend": "scripted",
        "options": {"echo": True, "delay_ms": 5, "context_tokens": 1024},
        "max_tokens": 200,
    },
]


@pytest.fixture(scope="module", autouse=True)
def echoing_models(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CHAT_MODELS", json.dumps(MODELS))
        patch.setenv("MEDIA_ROOT", str(tmp_path_factory.mktemp("media")))
        patch.setenv("CHAT_SENDS_PER_MINUTE", "1000")
        patch.setenv("CHAT_CONVERSATIONS_PER_MINUTE", "1000")
        yield


def file_payload(name: str, data: bytes, mime: str) -> dict[str, object]:
    return {"name": name, "mimeType": mime, "buffer": data}


def chips(page: Page) -> object:
    return page.locator("#composer-attachments .attachment-chip[data-attachment]")


def test_a_pdf_and_a_docx_reach_the_model_and_stay_with_the_message(
    server: Server, alice: BrowserContext, tmp_path: Path
) -> None:
    page = home(alice, server.base)
    new_conversation(page)
    page.locator("#attach-input").set_input_files(
        [
            file_payload(
                "q3.pdf", documents.text_pdf(["Revenue grew eleven percent"]), "application/pdf"
            ),
            file_payload(
                "plan.docx", documents.docx(["Hire two engineers"]), "application/octet-stream"
            ),
        ]
    )
    expect(chips(page)).to_have_count(2)
    expect(page.locator("#composer-attachments")).to_contain_text("q3.pdf")
    expect(page.locator("#composer-attachments")).to_contain_text("DOCX")
    expect(page.locator("#composer-attachments")).to_contain_text("tokens")

    send(page, "Summarise")

    reply = page.locator("#messages .message.assistant").last
    expect(reply).to_have_attribute("data-status", "complete")
    expect(reply).to_contain_text("Revenue grew eleven percent")
    expect(reply).to_contain_text("Hire two engineers")
    expect(reply).to_contain_text("Attached file: plan.docx (DOCX)")
    asked = page.locator("#messages .message.user").last
    expect(asked.locator(".attachments li")).to_have_count(2)
    expect(chips(page)).to_have_count(0)  # sent: the composer let go of them

    with page.expect_download() as download:
        asked.locator("a", has_text="q3.pdf").click()
    saved = tmp_path / "q3.pdf"
    download.value.save_as(saved)
    assert saved.read_bytes().startswith(b"%PDF-")

    page.reload()  # listed on the message after a reload too
    expect(page.locator("#messages .message.user .attachments li")).to_have_count(2)


def test_files_come_from_a_drop_and_a_paste_and_a_reload_keeps_them(
    server: Server, alice: BrowserContext
) -> None:
    page = home(alice, server.base)
    new_conversation(page)
    put = """([kind, name, text]) => {
        const data = new DataTransfer();
        data.items.add(new File([text], name, {type: "text/plain"}));
        const target = kind === "drop" ? document.querySelector(".composer") : document.getElementById("message-box");
        const event = kind === "drop"
            ? new DragEvent("drop", {dataTransfer: data, bubbles: true, cancelable: true})
            : new ClipboardEvent("paste", {clipboardData: data, bubbles: true, cancelable: true});
        target.dispatchEvent(event);
    }"""
    page.evaluate(put, ["drop", "dropped.csv", "name,total\nalice,3\n"])
    page.evaluate(put, ["paste", "pasted.json", '{"pasted": true}'])
    expect(chips(page)).to_have_count(2)

    page.reload()
    expect(chips(page)).to_have_count(2)  # kept, as a draft is
    removed = page.locator("#composer-attachments .attachment-name").first.inner_text()
    page.locator("#composer-attachments .attachment-remove").first.click()
    expect(chips(page)).to_have_count(1)
    kept = page.locator("#composer-attachments .attachment-name").first.inner_text()
    assert {removed, kept} == {"dropped.csv", "pasted.json"}

    # A message of files alone may be sent without text.
    page.locator("#send-form button.send").click()
    reply = page.locator("#messages .message.assistant").last
    expect(reply).to_have_attribute("data-status", "complete")
    expect(reply).to_contain_text(f"Attached file: {kept} (text)")
    expect(reply).not_to_contain_text(removed)


def test_a_file_too_long_for_the_model_is_refused_with_its_count(
    server: Server, alice: BrowserContext
) -> None:
    page = home(alice, server.base)
    new_conversation(page)
    page.locator("select.model-picker").select_option("small")
    page.locator("#attach-input").set_input_files(
        [file_payload("long.txt", ("word " * 4000).encode(), "text/plain")]
    )
    notice = page.locator("#composer-limit")
    expect(notice).to_be_visible()
    expect(notice).to_contain_text("long.txt is about")
    expect(notice).to_contain_text("Small reads 1,024 at most")
    expect(chips(page)).to_have_count(0)

    # Nor is an image, for a model that reads none.
    png = base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    )
    page.locator("#attach-input").set_input_files([file_payload("dot.png", png, "image/png")])
    expect(notice).to_contain_text("Small does not read images")
