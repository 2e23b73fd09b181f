"""Accounts an identity provider vouches for: found by the provider's name for the person (never
by username or email), made at their first login, their groups following the provider's claim.

Nothing here speaks a protocol: conversations.services.oidc verifies the login and hands over
the claims it read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import IntegrityError, transaction
from django.utils import timezone

from conversations.models import ExternalIdentity
from conversations.services import audit
from conversations.types import User

# What Django's username validator allows; anything else in a provider's username becomes "-".
_NOT_IN_USERNAME = re.compile(r"[^\w.@+-]+")
_USERNAME_MAX = 150
_NAME_MAX = 150
_GROUP_NAME_MAX = 150


@dataclass(frozen=True)
class ExternalProfile:
    """What the provider says about the person at this login."""

    provider: str  # e.g. "oidc:https://id.example.com"
    subject: str  # the provider's stable, never reassigned id for the person
    username: str = ""  # a wish: taken already by someone else, it gets a suffix
    email: str = ""
    first_name: str = ""
    last_name: str = ""
    groups: tuple[str, ...] = ()
    # None: leave is_staff as the admin set it; True/False: the provider decides.
    is_staff: bool | None = None


def external_user_sign_in(*, profile: ExternalProfile) -> User | None:
    """The account of this identity, made at its first login; its email, names, staff flag and
    the provider's groups brought up to date. None for a deactivated account.

    A username or email shared with a local account signs nobody into it: the new account gets
    a username of its own.
    """
    try:
        with transaction.atomic():
            identity = _identity_for(profile)
    except IntegrityError:
        # A login of the same person made the identity first (its unique constraint decided),
        # or another new account took the username meanwhile: look again.
        with transaction.atomic():
            identity = _identity_for(profile)
    user = identity.user
    if not user.is_active:
        return None
    # The audit log's rows of what changes name the provider as who changed it.
    with audit.acting_as(f"{profile.provider} (single sign-on)"):
        _update_details(user, profile)
        _sync_groups(identity, profile)
    return user


def _identity_for(profile: ExternalProfile) -> ExternalIdentity:
    identity = (
        ExternalIdentity.objects.select_related("user")
        .filter(provider=profile.provider, subject=profile.subject)
        .first()
    )
    if identity is not None:
        return identity
    # No password: this account signs in at its provider only (and no password reset reaches it).
    user = get_user_model().objects.create_user(
        _free_username(profile), email=profile.email, password=None
    )
    return ExternalIdentity.objects.create(
        user=user, provider=profile.provider, subject=profile.subject
    )


def _free_username(profile: ExternalProfile) -> str:
    wished = profile.username or profile.email.partition("@")[0] or "user"
    base = _NOT_IN_USERNAME.sub("-", wished).strip("-") or "user"
    base = base[: _USERNAME_MAX - 8]
    users = get_user_model().objects
    candidate, suffix = base, 1
    # Any case: Django's forms treat "Alice" and "alice" as the same username.
    while users.filter(username__iexact=candidate).exists():
        suffix += 1
        candidate = f"{base}-{suffix}"
    return candidate


def _update_details(user: User, profile: ExternalProfile) -> None:
    wanted: dict[str, object] = {
        "email": profile.email,
        "first_name": profile.first_name[:_NAME_MAX],
        "last_name": profile.last_name[:_NAME_MAX],
    }
    if profile.is_staff is not None:
        wanted["is_staff"] = profile.is_staff
    changed = [field for field, value in wanted.items() if getattr(user, field) != value]
    for field in changed:
        setattr(user, field, wanted[field])
    if changed:
        # Only what changed: a save tells the user's sockets to check their sessions again.
        user.save(update_fields=changed)


def _sync_groups(identity: ExternalIdentity, profile: ExternalProfile) -> None:
    """Join the claimed groups, leave the ones the provider claimed last time and no longer
    does; groups given in chatsite itself stay. remove() and add(), so that m2m_changed fires
    and replies of a model the person may no longer use stop (generation.deprovision)."""
    user = identity.user
    claimed = {name[:_GROUP_NAME_MAX] for name in profile.groups if name}
    lost = list(user.groups.filter(name__in=set(identity.claimed_groups) - claimed))
    if lost:
        user.groups.remove(*lost)
    if claimed:
        user.groups.add(*_groups_named(claimed))
    identity.claimed_groups = sorted(claimed)
    identity.last_login_at = timezone.now()
    identity.save(update_fields=["claimed_groups", "last_login_at"])


def _groups_named(names: Iterable[str]) -> list[Group]:
    return [Group.objects.get_or_create(name=name)[0] for name in sorted(names)]
