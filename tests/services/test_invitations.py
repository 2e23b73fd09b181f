"""Joining by invitation (issue 24): staff make a one-use, expiring link in the admin, with groups;
the invitee chooses a username and password and lands in the chat. No open sign-up unless
CHAT_OPEN_SIGNUP."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone

from conversations.models import Invitation
from conversations.services.invitations import invitation_create

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-and-unusual-passphrase"


@pytest.fixture
def staff() -> Client:
    root = get_user_model().objects.create_superuser("root", "root@example.com", "root-pw")
    client = Client()
    client.force_login(root)
    return client


def invite_in_the_admin(staff: Client, groups: list[Group]) -> str:
    """The link the admin shows once, after the invitation is saved."""
    response = staff.post(
        "/admin/conversations/invitation/add/",
        {"note": "For Dana", "groups": [g.pk for g in groups], "days": 3},
        follow=True,
    )
    assert response.status_code == 200
    found = re.search(r"http://testserver(/join/[\w-]+/)", response.content.decode())
    assert found, response.content.decode()[:2000]
    return found[1]


def join(link: str, username: str, password: str = PASSWORD) -> tuple[Client, Any]:
    client = Client()
    response = client.post(
        link, {"username": username, "password1": password, "password2": password}
    )
    return client, response


def test_an_invitation_makes_one_account_in_its_groups_and_signs_it_in(staff: Client) -> None:
    team = Group.objects.create(name="team")
    link = invite_in_the_admin(staff, [team])
    invitation = Invitation.objects.get()
    assert invitation.note == "For Dana" and invitation.state == "open"
    assert timedelta(days=2) < invitation.expires_at - timezone.now() <= timedelta(days=3)
    assert "team" in Client().get(link).content.decode()

    client, response = join(link, "dana")
    assert response.status_code == 302 and response["Location"] == "/"
    dana = get_user_model().objects.get(username="dana")
    assert list(dana.groups.values_list("name", flat=True)) == ["team"]
    assert client.get("/").status_code == 200  # signed in, in the chat
    invitation.refresh_from_db()
    assert invitation.used_by == dana and invitation.state == "used"

    _, again = join(link, "mallory")
    assert again.status_code == 410 and "used already" in again.content.decode()
    assert not get_user_model().objects.filter(username="mallory").exists()


def test_an_expired_or_unknown_invitation_is_refused(alice: Any) -> None:
    _, token = invitation_create(created_by=alice)
    Invitation.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    _, response = join(f"/join/{token}/", "late")
    assert response.status_code == 410 and "expired" in response.content.decode()
    assert Client().get("/join/not-a-token/").status_code == 410
    assert not get_user_model().objects.filter(username="late").exists()


def test_the_password_validators_and_a_taken_username_keep_the_invitation(alice: Any) -> None:
    _, token = invitation_create(created_by=alice)
    _, weak = join(f"/join/{token}/", "erin", "123")
    assert weak.status_code == 200 and "too short" in weak.content.decode()
    _, taken = join(f"/join/{token}/", "ALICE")
    assert taken.status_code == 200 and "already exists" in taken.content.decode()
    assert Invitation.objects.get().state == "open"


def test_there_is_no_sign_up_unless_it_is_opened(settings: Any) -> None:
    assert Client().get("/signup/").status_code == 404
    assert "Sign up" not in Client().get("/accounts/login/").content.decode()
    settings.CHAT_OPEN_SIGNUP = True
    assert "Sign up" in Client().get("/accounts/login/").content.decode()
    client, response = join("/signup/", "frank")
    assert response.status_code == 302
    assert not get_user_model().objects.get(username="frank").groups.exists()
    assert client.get("/").status_code == 200
