"""Issue 30, problem 8: the page's language, from the browser's Accept-Language or the person's
choice (the top bar's menu), kept for a signed-in person in their preferences."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from conversations.models import UserPreferences

COOKIE = settings.LANGUAGE_COOKIE_NAME


def test_problem_8_the_browsers_language_is_the_pages_language(client: Any, db: Any) -> None:
    page = client.get("/accounts/login/", HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9,en;q=0.5")
    text = page.content.decode()
    assert '<html lang="zh-hans"' in text
    assert "<h1>登录</h1>" in text
    french = client.get("/accounts/login/", HTTP_ACCEPT_LANGUAGE="fr-FR,fr;q=0.9")
    assert "<h1>Se connecter</h1>" in french.content.decode()
    assert "<h1>Log in</h1>" in client.get("/accounts/login/").content.decode()


def test_problem_8_anyone_chooses_a_language_in_the_cookie(client: Any, db: Any) -> None:
    response = client.post("/settings/language/", {"language": "fr", "next": "/accounts/login/"})
    assert response.status_code == 302 and response["Location"] == "/accounts/login/"
    assert response.cookies[COOKIE].value == "fr"
    page = client.get("/accounts/login/", HTTP_ACCEPT_LANGUAGE="zh-CN")
    assert "<h1>Se connecter</h1>" in page.content.decode()  # the choice wins over the browser


def test_problem_8_a_signed_in_choice_follows_the_person_to_another_device(
    client: Any, alice: Any
) -> None:
    client.force_login(alice)
    client.post("/settings/language/", {"language": "zh-hans", "next": "/"})
    assert UserPreferences.objects.get(user=alice).language == "zh-hans"

    client.cookies.pop(COOKIE)  # another browser: no cookie, and an English one at that
    page = client.get("/", HTTP_ACCEPT_LANGUAGE="en-US")
    assert '<html lang="zh-hans"' in page.content.decode()
    assert "你的对话" in page.content.decode()
    # The cookie is set again, for the socket (which reads it rather than the database).
    assert page.cookies[COOKIE].value == "zh-hans"


def test_problem_8_a_language_not_offered_is_refused(client: Any, alice: Any) -> None:
    client.force_login(alice)
    assert client.post("/settings/language/", {"language": "xx"}).status_code == 400
    assert not UserPreferences.objects.filter(user=alice).exclude(language="").exists()


def test_problem_8_the_way_back_stays_on_this_site(client: Any, db: Any) -> None:
    response = client.post(
        "/settings/language/", {"language": "fr", "next": "https://elsewhere.example/"}
    )
    assert response["Location"] == "/"


def test_problem_8_a_get_changes_nothing(client: Any, db: Any) -> None:
    assert client.get("/settings/language/?language=fr").status_code == 405
