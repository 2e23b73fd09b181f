"""Joining chatsite: by an invitation staff made (one use, expiring, with its groups), or, where
CHAT_OPEN_SIGNUP is on, by signing up."""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from conversations.models import Invitation
from conversations.services import audit
from conversations.services.tokens import key_hash
from conversations.types import User


class InvitationUnusable(Exception):
    """The link is unknown, used already or expired: the message says which."""


def invitation_create(
    *,
    created_by: User | None,
    groups: Iterable[Group] = (),
    note: str = "",
    days: int | None = None,
) -> tuple[Invitation, str]:
    """An invitation valid for `days` (CHAT_INVITATION_DAYS by default) and its token, which is
    not stored and cannot be shown again."""
    token = secrets.token_urlsafe(32)
    lifetime = timedelta(days=days if days is not None else settings.CHAT_INVITATION_DAYS)
    with transaction.atomic():
        invitation = Invitation.objects.create(
            token_hash=key_hash(token),
            note=note,
            created_by=created_by,
            expires_at=timezone.now() + lifetime,
        )
        invitation.groups.set(groups)
        audit.record(
            audit.Event.INVITATION_CREATED,
            actor=created_by,
            invitation=invitation.pk,
            groups=sorted(group.name for group in invitation.groups.all()),
            expires_at=invitation.expires_at.isoformat(),
        )
    return invitation, token


def invitation_for(token: str) -> Invitation:
    """The usable invitation this token is for; InvitationUnusable with the reason otherwise."""
    invitation = Invitation.objects.filter(token_hash=key_hash(token)).first()
    _check(invitation)
    assert invitation is not None
    return invitation


def invitation_accept(*, token: str, username: str, password: str) -> User:
    """Make the invited person's account (in the invitation's groups) and use the invitation up:
    two people taking one link at once make one account between them."""
    with transaction.atomic():
        invitation = (
            Invitation.objects.select_for_update().filter(token_hash=key_hash(token)).first()
        )
        _check(invitation)
        assert invitation is not None
        user = get_user_model().objects.create_user(username=username, password=password)
        user.groups.set(invitation.groups.all())
        invitation.used_at = timezone.now()
        invitation.used_by = user
        invitation.save(update_fields=["used_at", "used_by"])
        audit.record(
            audit.Event.INVITATION_ACCEPTED, actor=user, subject=user, invitation=invitation.pk
        )
    return user


def sign_up(*, username: str, password: str) -> User:
    """An account of one's own, where CHAT_OPEN_SIGNUP allows it (in no group)."""
    user: User = get_user_model().objects.create_user(username=username, password=password)
    return user


def _check(invitation: Invitation | None) -> None:
    if invitation is None:
        raise InvitationUnusable(_("This invitation link is not valid. Ask for a new one."))
    if invitation.used_at is not None:
        raise InvitationUnusable(_("This invitation was used already. Sign in instead."))
    if invitation.expires_at <= timezone.now():
        raise InvitationUnusable(_("This invitation has expired. Ask for a new one."))
