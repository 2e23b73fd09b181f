"""The audit log (issue 26): a row for each thing the issue lists, written in the action's own
transaction, never changed (the model refuses, and the database's trigger too), exported as JSON
Lines since a date, and pruned by age."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from conversations.models import AuditEvent, Budget, ChatModel, Conversation, Message
from conversations.services.external_identities import ExternalProfile, external_user_sign_in
from conversations.services.invitations import invitation_accept, invitation_create
from conversations.services.shares import share_create, share_revoke
from conversations.services.tokens import api_token_create, api_token_revoke
from tests.imports.helpers import api_client, upload
from tests.imports.sources import chatgpt_branched, chatgpt_zip

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-and-unusual-passphrase"


def rows(event: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(event=event).order_by("id"))


def only(event: str) -> AuditEvent:
    found = rows(event)
    assert len(found) == 1, found
    return found[0]


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_sign_ins_failed_ones_and_sign_outs(alice: Any) -> None:
    client = Client()
    login = reverse("login")
    client.post(login, {"username": "alice", "password": "wrong"})
    client.post(login, {"username": "nobody", "password": "wrong"})
    client.post(login, {"username": "alice", "password": "alice-password"})
    client.post(reverse("logout"))

    failed = rows("login_failed")
    assert [(e.subject_id, e.detail["username"]) for e in failed] == [
        (alice.pk, "alice"),
        (None, "nobody"),
    ]
    assert all("wrong" not in json.dumps(e.detail) for e in failed)
    login_row = only("login")
    assert (login_row.actor_id, login_row.subject, login_row.ip) == (alice.pk, "alice", "127.0.0.1")
    assert login_row.detail == {"backend": "PasswordBackend"}
    assert only("logout").actor == "alice"


def test_a_password_change_by_its_owner_or_by_staff(alice: Any) -> None:
    client = signed_in(alice)
    response = client.post(
        reverse("password_change"),
        {"old_password": "alice-password", "new_password1": PASSWORD, "new_password2": PASSWORD},
    )
    assert response.status_code == 302
    root = get_user_model().objects.create_superuser("root", "root@example.com", "root-pw")
    signed_in(root).post(
        reverse("admin:auth_user_password_change", args=[alice.pk]),
        {"password1": PASSWORD + "2", "password2": PASSWORD + "2", "usable_password": "true"},
    )

    changes = rows("password_changed")
    assert [(e.actor, e.subject) for e in changes] == [("alice", "alice"), ("root", "alice")]
    alice.refresh_from_db()
    alice.save()  # a save that carries no new password is not a change
    assert len(rows("password_changed")) == 2


def test_api_tokens_made_and_revoked(alice: Any) -> None:
    token, _ = api_token_create(user=alice, name="laptop")
    api_token_revoke(token=token)
    api_token_revoke(token=token)  # revoked already: nothing more happened

    made, revoked = only("token_created"), only("token_revoked")
    assert made.subject == revoked.subject == "alice"
    assert made.detail == revoked.detail == {"token": token.prefix, "name": "laptop"}


def test_a_row_commits_or_rolls_back_with_its_action(alice: Any) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        api_token_create(user=alice, name="never")
        raise RuntimeError

    assert not rows("token_created")


def test_invitations_made_and_accepted(db: Any) -> None:
    root = get_user_model().objects.create_superuser("root", "root@example.com", "root-pw")
    team = Group.objects.create(name="team")
    invitation, token = invitation_create(created_by=root, groups=[team])
    dana = invitation_accept(token=token, username="dana", password=PASSWORD)

    made = only("invitation_created")
    assert (made.actor, made.detail["groups"]) == ("root", ["team"])
    accepted = only("invitation_accepted")
    assert (accepted.actor_id, accepted.subject_id) == (dana.pk, dana.pk)
    assert accepted.detail == {"invitation": invitation.pk}


def test_an_invitation_made_in_the_admin_names_its_groups(db: Any) -> None:
    root = get_user_model().objects.create_superuser("root", "root@example.com", "root-pw")
    team = Group.objects.create(name="team")
    signed_in(root).post(
        reverse("admin:conversations_invitation_add"),
        {"note": "For Dana", "groups": [team.pk], "days": 3},
    )

    made = only("invitation_created")
    assert (made.actor, made.detail["groups"]) == ("root", ["team"])


def test_signing_out_everywhere_is_a_sign_out(alice: Any) -> None:
    client = signed_in(alice)
    signed_in(alice)  # a second device
    client.post(reverse("sign-out-everywhere"))

    row = only("logout")
    assert (row.actor, row.detail) == ("alice", {"everywhere": True, "sessions": 2})


def test_a_deleted_group_and_an_account_made_with_access(alice: Any) -> None:
    team = Group.objects.create(name="team")
    alice.groups.add(team)
    team.delete()
    get_user_model().objects.create_superuser("root", "root@example.com", "root-pw")

    assert [e.detail for e in rows("groups_changed")] == [
        {"added": ["team"]},
        {"removed": ["team"]},
    ]
    made = only("permissions_changed")
    assert (made.subject, made.detail) == (
        "root",
        {"is_staff": [None, True], "is_superuser": [None, True]},
    )


def test_groups_and_permissions_given_and_taken(alice: Any) -> None:
    team, readers = Group.objects.create(name="team"), Group.objects.create(name="readers")
    view = Permission.objects.get(codename="view_conversation")
    alice.groups.add(team, readers)
    alice.groups.remove(readers)
    team.user_set.remove(alice)  # from the group's side
    alice.user_permissions.add(view)
    team.permissions.add(view)
    alice.is_staff = True
    alice.save()

    assert [e.detail for e in rows("groups_changed")] == [
        {"added": ["readers", "team"]},
        {"removed": ["readers"]},
        {"removed": ["team"]},
    ]
    given = rows("permissions_changed")
    assert [e.detail for e in given] == [
        {"added": ["view_conversation"]},
        {"group": "team", "added": ["view_conversation"]},
        {"is_staff": [False, True]},
    ]
    assert [e.subject for e in given] == ["alice", "", "alice"]


def test_a_providers_group_changes_name_the_provider(alice: Any) -> None:
    profile = ExternalProfile(provider="oidc:https://id.example.com", subject="e1", username="eve")
    eve = external_user_sign_in(profile=profile.__class__(**{**vars(profile), "groups": ("a",)}))
    assert eve is not None
    external_user_sign_in(profile=profile.__class__(**{**vars(profile), "groups": ("b",)}))

    changes = [(e.actor, e.subject, e.detail) for e in rows("groups_changed")]
    provider = "oidc:https://id.example.com (single sign-on)"
    assert changes == [
        (provider, "eve", {"added": ["a"]}),
        (provider, "eve", {"removed": ["a"]}),
        (provider, "eve", {"added": ["b"]}),
    ]


def test_models_and_budgets_changed_in_the_admin(alice: Any) -> None:
    root = get_user_model().objects.create_superuser("root", "root@example.com", "root-pw")
    admin = signed_in(root)
    team = Group.objects.create(name="team")
    response = admin.post(
        reverse("admin:conversations_chatmodel_add"),
        {
            "slug": "big",
            "name": "Big",
            "backend": "scripted",
            "model_id": "",
            "options": "{}",
            "context_tokens": 2048,
            "temperature": 0.7,
            "max_tokens": 512,
            "max_temperature": 2.0,
            "max_tokens_limit": 4096,
            "groups": [team.pk],
            "enabled": "on",
            "position": 0,
        },
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    admin.post(
        reverse("admin:conversations_budget_add"),
        {"user": alice.pk, "tokens_per_day": 1000, "tokens_per_month": ""},
    )
    Budget.objects.get(user=alice).delete()
    ChatModel.objects.get(slug="big").delete()

    models = rows("model_changed")
    assert [(e.actor, e.detail) for e in models] == [
        ("root", {"model": "big", "action": "created", "enabled": True}),
        ("root", {"model": "big", "groups": {"added": ["team"]}}),
        ("", {"model": "big", "action": "deleted"}),
    ]
    budgets = rows("budget_changed")
    assert [(e.actor, e.subject, e.detail["action"]) for e in budgets] == [
        ("root", "alice", "created"),
        ("", "alice", "deleted"),
    ]
    assert budgets[0].detail["tokens_per_day"] == 1000


def test_exports_imports_and_share_links(alice: Any, conversation: Conversation) -> None:
    Message.objects.create(conversation=conversation, role="user", content="Hi")
    api = api_client(alice)
    assert (
        api.get(f"/api/conversations/{conversation.pk}/export?format=markdown").status_code == 200
    )
    assert api.get("/api/export.jsonl?q=Hi").status_code == 200
    assert (
        api.post("/api/imports/", {"file": upload(chatgpt_zip(chatgpt_branched()))}).status_code
        == 201
    )
    share, _ = share_create(conversation=conversation, created_by=alice)
    share_revoke(share=share)

    exports = rows("export")
    assert [(e.conversation_id, e.detail) for e in exports] == [
        (conversation.pk, {"format": "markdown"}),
        (None, {"format": "jsonl", "first_page": True, "filters": {"q": "Hi"}}),
    ]
    assert {e.actor for e in exports} == {"alice"}
    imported = only("import")
    assert (imported.actor, imported.subject) == ("alice", "alice")
    assert imported.detail == {"format": "chatgpt", "imported": 1, "skipped": 1, "stopped": False}
    created, revoked = only("share_created"), only("share_revoked")
    assert created.conversation_id == revoked.conversation_id == conversation.pk
    assert created.detail == {"share": share.pk, "messages": 1}


def test_rows_are_never_changed_by_the_orm_or_by_sql(alice: Any) -> None:
    api_token_create(user=alice, name="t")
    row = only("token_created")

    with pytest.raises(TypeError):
        AuditEvent.objects.filter(pk=row.pk).update(actor="someone else")
    with pytest.raises(TypeError):
        row.save()
    with pytest.raises(TypeError):
        row.delete()
    with pytest.raises(TypeError):
        AuditEvent.objects.all().delete()
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute("UPDATE conversations_auditevent SET subject = 'x'")
    assert AuditEvent.objects.get(pk=row.pk).subject == "alice"


def test_deleting_the_account_keeps_its_rows(alice: Any) -> None:
    api_token_create(user=alice, name="t")
    alice_id = alice.pk
    alice.delete()

    row = only("token_created")
    assert (row.subject_id, row.subject) == (alice_id, "alice")


def at(days_ago: float) -> Any:
    return timezone.now() - timedelta(days=days_ago)


def test_export_audit_writes_json_lines_since_a_date(tmp_path: Path) -> None:
    for days in (10, 3, 1):
        AuditEvent.objects.create(event="login", at=at(days), actor=f"{days} days ago")
    since = timezone.localtime(at(5)).date().isoformat()

    out, err = io.StringIO(), io.StringIO()
    call_command("export_audit", "--since", since, stdout=out, stderr=err)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["actor"] for line in lines] == ["3 days ago", "1 days ago"]
    assert "2 audit rows written" in err.getvalue()

    target = tmp_path / "audit.jsonl"
    call_command("export_audit", "--since", since, "--output", str(target), stderr=io.StringIO())
    assert [json.loads(line)["actor"] for line in target.read_text().splitlines()] == [
        "3 days ago",
        "1 days ago",
    ]
    with pytest.raises(CommandError, match="not a date"):
        call_command("export_audit", "--since", "last week")


def test_prune_audit_deletes_rows_past_the_retention(settings: Any) -> None:
    for days in (400, 100, 1):
        AuditEvent.objects.create(event="login", at=at(days), actor=f"{days} days ago")

    settings.CHAT_AUDIT_RETENTION_DAYS = 0
    call_command("prune_audit", stdout=io.StringIO())
    assert AuditEvent.objects.count() == 3
    settings.CHAT_AUDIT_RETENTION_DAYS = 365
    out = io.StringIO()
    call_command("prune_audit", stdout=out)
    assert "1 audit row older than 365 days deleted" in out.getvalue()
    settings.CHAT_AUDIT_RETENTION_DAYS = 30
    call_command("prune_audit", stdout=io.StringIO())
    assert list(AuditEvent.objects.values_list("actor", flat=True)) == ["1 days ago"]
