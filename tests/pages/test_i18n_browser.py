"""Issue 30, problem 8: the whole page reads in Chinese, in Chromium.

A browser whose language is Chinese (Playwright's locale zh-CN, so Accept-Language: zh-CN) visits
every kind of page, opens its dialogs and menus, streams a reply and stops it, and reads what the
page shows: the visible text (screen-reader text included) and the labels, titles, placeholders
and confirmations. No English word may be left, apart from names that read the same everywhere
(chatsite, the model's name, formats such as JSON), the keys printed on a keyboard, the code the
page shows as code, and what the test and the model wrote. Another test chooses French in the top
bar's menu, and the pages and the scripts speak it from then on.

The server, its database and the browser are test_browser.py's fixtures.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from conversations.models.sign_ins import _BROWSERS, _SYSTEMS
from tests.imports.sources import chatgpt_conversation, chatgpt_node
from tests.pages import test_browser
from tests.pages.test_browser import Server

pytestmark = pytest.mark.browser

server = test_browser.server
browser = test_browser.browser
alice_session = test_browser.alice_session

# Words that are the same in a Chinese page: the brand, names of formats, products and
# protocols, the keys on a keyboard, the loanword "token" that Chinese LLM products keep, and the
# time zone's name.
SAME_IN_EVERY_LANGUAGE = {
    "chatsite", "API", "REST", "OpenAI", "JSON", "JSONL", "CSV", "PDF", "DOCX", "PNG", "JPEG", "GIF", "WebP", "Markdown",
    "Zip", "zip", "ChatGPT", "Claude", "Open", "WebUI", "Shift", "Enter", "Esc", "Alt", "token",
    "UTC", "Python",
}  # fmt: skip
ENGLISH_WORD = re.compile(r"[A-Za-z]{3,}")
# The account page's devices: browsers' and systems' names ("Linux 上的 Chrome").
SAME_IN_EVERY_LANGUAGE |= {
    word for _token, name in (*_BROWSERS, *_SYSTEMS) for word in ENGLISH_WORD.findall(name)
}

# Everything the page shows that a person reads: each visible text node outside what is not the
# page's own words (code, the keys, user and model text, the model's name, a language's own name in
# the language menu), and the texts of labels, titles, placeholders and confirmations.
READ_PAGE = """() => {
  const notOurs = "code, pre, kbd, script, style, template, .user-text, .markdown, .written, "
    + ".writing, .model-name, .model-answering, .prompt-text, [lang]:not(html), "
    + "select[name=model] option, .hit-snippet, .attachment-name, "
    // The usage report's rows are named by their data: a person, a group, a model's slug.
    + ".usage-report table.usage tbody th";
  // A reply's code block is the model's, but its toolbar (Copy) is the page's; its language's
  // name (python) is code.
  const ours = (element) => element.closest(".code-toolbar")
    ? !element.matches(".code-toolbar > span:first-child") : !element.closest(notOurs);
  const texts = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const element = node.parentElement;
    if (!node.data.trim() || !ours(element)) continue;
    // A closed menu's options count as shown: they are one click away.
    const shown = element.closest("select") || element;
    if (!shown.checkVisibility({ checkVisibilityCSS: true })) continue;
    texts.push(node.data.trim());
  }
  // The system prompt's placeholder is the model's own prompt, as its operator wrote it.
  const modelsPrompt = ".chat-settings textarea[name=system_prompt]";
  for (const element of document.querySelectorAll(
      "[aria-label], [title], [placeholder], [alt], [data-confirm]")) {
    if (!ours(element) && !element.matches("[lang]:not(html)")) continue;
    if (element.matches(modelsPrompt)) continue;
    for (const name of ["aria-label", "title", "placeholder", "alt", "data-confirm"]) {
      const value = element.getAttribute(name);
      if (value) texts.push(value);
    }
  }
  texts.push(document.title);
  const models = Array.from(document.querySelectorAll("select[name=model] option"),
    (option) => option.textContent);
  return { texts, models };
}"""

# Runs in the server's environment: what alice has for every page to show something: usage rights,
# a project, a saved prompt, an archived conversation, and a conversation with a finished reply
# (code in it, for the code block's Copy button), all named in Chinese.
SEED_SCRIPT = """
import json, django
django.setup()
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from conversations.models import Conversation, Message, Project, SavedPrompt
alice = get_user_model().objects.get(username="alice")
alice.user_permissions.add(Permission.objects.get(codename="view_tokenusage"))
project = Project.objects.create(owner=alice, name="周末计划")
SavedPrompt.objects.create(owner=alice, title="翻译", text="把这段话翻译成{{语言}}")
Conversation.objects.create(owner=alice, title="旧的对话", archived=True)
chat = Conversation.objects.create(owner=alice, title="关于代码的问题", project=project)
Message.objects.create(conversation=chat, role="user", content="给我看一段代码")
Message.objects.create(
    conversation=chat, role="assistant", status="complete", content="```python\\nprint(1)\\n```",
    engine="scripted", model="scripted", model_slug="scripted", completion_tokens=7,
)
print(json.dumps({"chat": str(chat.pk), "project": project.pk}))
"""


NEW_USER_SCRIPT = """
import json, sys, django
django.setup()
from django.contrib.auth import get_user_model
get_user_model().objects.create_user(sys.argv[1], password=sys.argv[1] + "-password")
print(json.dumps(sys.argv[1]))
"""


@pytest.fixture(scope="module")
def seeded(server: Server) -> dict[str, Any]:
    return dict(server.run_script(SEED_SCRIPT))


@pytest.fixture
def chinese(browser: Browser, alice_session: str) -> Iterator[BrowserContext]:
    """Alice's browser, in Chinese; a script error on its pages fails the test."""
    context = browser.new_context(
        locale="zh-CN", viewport={"width": 1100, "height": 720}, storage_state=alice_session
    )
    errors: list[str] = []
    context.on("weberror", lambda error: errors.append(str(error.error)))
    yield context
    context.close()
    assert not errors, errors


def sign_in(context: BrowserContext, base: str, username: str, *, button: str) -> Page:
    page = context.new_page()
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", f"{username}-password")
    page.get_by_role("button", name=button).click()
    expect(page).to_have_url(f"{base}/")
    return page


def english_left(page: Page, *also_allowed: str) -> list[str]:
    """The English words the page shows, with where they are."""
    read = page.evaluate(READ_PAGE)
    allowed = SAME_IN_EVERY_LANGUAGE | set(also_allowed) | {"alice", "scripted", "Scripted"}
    for model in read["models"]:
        allowed |= set(ENGLISH_WORD.findall(model))
    return [
        text
        for text in read["texts"]
        if any(word not in allowed for word in ENGLISH_WORD.findall(text))
    ]


def assert_chinese(page: Page, *also_allowed: str) -> None:
    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
    assert english_left(page, *also_allowed) == [], page.url


def test_problem_8_the_login_page_reads_in_chinese(server: Server, browser: Browser) -> None:
    context = browser.new_context(locale="zh-CN")
    page = context.new_page()
    page.goto(f"{server.base}/accounts/login/")
    assert_chinese(page)
    page.fill("#id_username", "alice")
    page.fill("#id_password", "wrong")
    page.get_by_role("button", name="登录").click()
    expect(page.get_by_role("alert")).to_have_text("用户名或密码错误，请重试。")  # noqa: RUF001
    assert_chinese(page)
    context.close()


def test_problem_8_the_conversations_read_in_chinese_while_a_reply_streams_and_stops(
    server: Server, chinese: BrowserContext, seeded: dict[str, Any]
) -> None:
    page = chinese.new_page()
    page.goto(f"{server.base}/")
    assert_chinese(page)

    page.get_by_role("button", name="新对话").click()
    expect(page.locator("section.chat[data-socket=open]")).to_be_visible()
    assert_chinese(page)  # the empty conversation: its examples, the composer, the settings
    page.locator("#send-form textarea").fill("你好，请写一首长诗")  # noqa: RUF001
    page.locator("#send-form textarea").press("Enter")
    expect(page.locator("#stop-button")).to_be_enabled()
    expect(page.locator("article.message.assistant .badge.streaming")).to_have_text("生成中…")
    assert_chinese(page)
    page.locator("#stop-button").click()
    expect(page.locator("article.message.assistant .marker.stopped")).to_have_text("已停止。")
    assert_chinese(page)

    # The menus and dialogs: the conversation's menu, the settings, the shortcuts.
    page.locator("details.conversation-menu > summary").click()
    page.locator("details.chat-settings > summary").click()
    assert_chinese(page)
    page.locator("details.conversation-menu > summary").click()
    page.get_by_role("button", name="快捷键").click()
    expect(page.locator("#shortcuts-dialog")).to_be_visible()
    assert_chinese(page)
    page.keyboard.press("Escape")

    # A saved reply with code: the code block's toolbar comes from the script, in Chinese.
    page.goto(f"{server.base}/conversations/{seeded['chat']}/")
    expect(page.locator(".code-toolbar button.copy")).to_be_visible()
    assert_chinese(page)
    page.locator("#send-form textarea").fill("/")
    expect(page.locator("#prompt-menu")).to_be_visible()
    assert_chinese(page)


def test_problem_8_search_the_archive_and_projects_read_in_chinese(
    server: Server, chinese: BrowserContext, seeded: dict[str, Any]
) -> None:
    page = chinese.new_page()
    page.goto(f"{server.base}/")
    page.locator("#search-box").fill("代码")
    expect(page.locator("#search-results .search-status")).to_be_visible()
    assert_chinese(page)
    page.locator("#search-box").fill("zzzz")
    expect(page.locator("#search-results .search-status.empty")).to_be_visible()
    assert_chinese(page, "zzzz")

    for path in ("/archive/", f"/projects/{seeded['project']}/", "/projects/new/"):
        page.goto(f"{server.base}{path}")
        page.locator("details summary").evaluate_all("(all) => all.forEach((s) => s.click())")
        assert_chinese(page)


def test_problem_8_the_settings_read_in_chinese(
    server: Server, chinese: BrowserContext, seeded: dict[str, Any], tmp_path: Path
) -> None:
    page = chinese.new_page()
    for path in ("/account/", "/settings/prompts/", "/usage/"):
        page.goto(f"{server.base}{path}")
        assert_chinese(page)

    page.goto(f"{server.base}/settings/tokens/")
    page.fill("#token-name", "备份")
    page.get_by_role("button", name="创建令牌").click()
    expect(page.locator("#new-token-key")).to_be_visible()
    assert_chinese(page)

    # An import: the report of what came in.
    nodes = [
        chatgpt_node("root", None, None),
        chatgpt_node("question", "root", "user", "你好", 1),
        chatgpt_node("answer", "question", "assistant", "你好！", 2),  # noqa: RUF001
    ]
    upload = tmp_path / "conversations.json"
    upload.write_text(json.dumps([chatgpt_conversation("c-1", "导入的对话", nodes, "answer")]))
    page.set_input_files("#import-file", str(upload))
    page.locator("#import-form button[type=submit]").click()
    expect(page.locator("#import-summary")).to_be_visible()
    assert_chinese(page)


def test_problem_8_share_links_and_the_shared_copy_read_in_chinese(
    server: Server, chinese: BrowserContext, seeded: dict[str, Any]
) -> None:
    page = chinese.new_page()
    page.goto(f"{server.base}/conversations/{seeded['chat']}/shares/")
    page.get_by_role("button", name="创建分享链接").click()
    link = page.locator("#new-share-url")
    expect(link).to_be_visible()
    assert_chinese(page)
    page.goto(link.input_value())
    assert_chinese(page)


def test_problem_8_french_is_chosen_in_the_top_bar_and_kept(
    server: Server, browser: Browser
) -> None:
    # A person of their own: the choice is saved with them, and alice's pages stay as they are.
    server.run_script(NEW_USER_SCRIPT, "francoise")
    context = browser.new_context()  # an English browser
    page = sign_in(context, server.base, "francoise", button="Log in")
    page.goto(f"{server.base}/account/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Your account")
    page.locator(".language-form select").select_option("fr")
    expect(page.get_by_role("heading", level=1)).to_have_text("Votre compte")
    expect(page.locator("html")).to_have_attribute("lang", "fr")

    # Every page from then on, the scripts' texts too (the composer's character count).
    page.goto(f"{server.base}/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Vos conversations")
    page.get_by_role("button", name="Nouvelle conversation").click()
    expect(page.locator("section.chat[data-socket=open]")).to_be_visible()
    page.locator("#send-form textarea").fill("x" * 7000)
    expect(page.locator("#composer-count")).to_contain_text("caractères")

    # Another browser where she signs in finds French too: the choice is hers, not the cookie's.
    other = browser.new_context(locale="zh-CN")
    login = sign_in(other, server.base, "francoise", button="登录")
    expect(login.get_by_role("heading", level=1)).to_have_text("Vos conversations")
    other.close()
    context.close()
