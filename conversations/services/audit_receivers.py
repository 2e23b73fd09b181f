"""The audit log's rows for what Django itself does: sign-ins, sign-outs and failed ones, new
passwords, staff and superuser flags, groups and permissions (in the admin, or synced from an
identity provider), and the admin's changes to models and budgets.

Receivers of Django's signals, so that every path is covered (the admin, a page, a command, a
single sign-on) without each remembering to write a row. A post_save or m2m_changed runs inside
the change's own transaction where there is one, as the admin's, so its row commits with it.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_delete, pre_save
from django.dispatch import receiver
from django.http import HttpRequest

from conversations.models import Budget, ChatModel
from conversations.services import audit
from conversations.types import User

Event = audit.Event
UserModel = get_user_model()
# The flags that grant or take away access, compared before and after a save.
ACCESS_FLAGS = ("is_active", "is_staff", "is_superuser")
_FLAGS_BEFORE = "_audit_flags_before"


@receiver(user_logged_in)
def _logged_in(sender: Any, request: HttpRequest, user: User, **kwargs: Any) -> None:
    backend = getattr(user, "backend", "") or ""
    audit.record(
        Event.LOGIN, actor=user, subject=user, request=request, backend=backend.rpartition(".")[2]
    )


@receiver(user_login_failed)
def _login_failed(
    sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None, **kwargs: Any
) -> None:
    # Django has replaced the password with stars already; only the name tried is kept.
    username = str(credentials.get("username", ""))[:150]
    subject = UserModel.objects.filter(username=username).first() if username else None
    audit.record(Event.LOGIN_FAILED, subject=subject, request=request, username=username)


@receiver(user_logged_out)
def _logged_out(sender: Any, request: HttpRequest, user: User | None, **kwargs: Any) -> None:
    if user is not None:
        audit.record(Event.LOGOUT, actor=user, subject=user, request=request)


@receiver(pre_save, sender=UserModel)
def _user_saving(sender: Any, instance: User, update_fields: Any = None, **kwargs: Any) -> None:
    if instance._state.adding or not _may_change(update_fields, ACCESS_FLAGS):
        return
    before = UserModel.objects.filter(pk=instance.pk).values(*ACCESS_FLAGS).first()
    setattr(instance, _FLAGS_BEFORE, before)


@receiver(post_save, sender=UserModel)
def _user_saved(
    sender: Any, instance: User, created: bool, update_fields: Any = None, **kwargs: Any
) -> None:
    if created:
        # Made with access already (createsuperuser, a directory's staff group at a first login).
        given = {
            flag: [None, True] for flag in ("is_staff", "is_superuser") if getattr(instance, flag)
        }
        if given:
            audit.record(Event.PERMISSIONS_CHANGED, subject=instance, detail=given)
        return
    # set_password() leaves the new password here until save() has written it (and then
    # clears it): a save that carries one is a password change.
    if getattr(instance, "_password", None) is not None:
        audit.record(Event.PASSWORD_CHANGED, subject=instance)
    before = instance.__dict__.pop(_FLAGS_BEFORE, None)
    if before:
        changed = {
            flag: [before[flag], getattr(instance, flag)]
            for flag in ACCESS_FLAGS
            if before[flag] != getattr(instance, flag)
        }
        if changed:
            audit.record(Event.PERMISSIONS_CHANGED, subject=instance, detail=changed)


def _may_change(update_fields: Any, fields: tuple[str, ...]) -> bool:
    return update_fields is None or bool(set(update_fields) & set(fields))


@receiver(m2m_changed, sender=UserModel.groups.through)
def _groups_changed(
    sender: Any, instance: Any, action: str, reverse: bool, pk_set: set[int] | None, **kwargs: Any
) -> None:
    if reverse:  # group.user_set.add(...): each user named gained or lost this one group
        change = _CHANGES.get(action)
        if change is None or (action != "pre_clear" and not pk_set):
            return
        users = (
            instance.user_set.all()
            if action == "pre_clear"
            else UserModel.objects.filter(pk__in=pk_set or ())
        )
        for user in users:
            audit.record(Event.GROUPS_CHANGED, subject=user, detail={change: [instance.name]})
        return
    named = _named_changes(action, pk_set, instance.groups, Group, "name")
    if named:
        audit.record(Event.GROUPS_CHANGED, subject=instance, detail=named)


@receiver(pre_delete, sender=Group)
def _group_deleted(sender: Any, instance: Group, **kwargs: Any) -> None:
    # Deleting a group removes its members without an m2m_changed: each of them loses it here.
    for user in instance.user_set.all():
        audit.record(Event.GROUPS_CHANGED, subject=user, detail={"removed": [instance.name]})


@receiver(m2m_changed, sender=UserModel.user_permissions.through)
def _user_permissions_changed(
    sender: Any, instance: Any, action: str, reverse: bool, pk_set: set[int] | None, **kwargs: Any
) -> None:
    named = (
        None
        if reverse
        else _named_changes(action, pk_set, instance.user_permissions, Permission, "codename")
    )
    if named:
        audit.record(Event.PERMISSIONS_CHANGED, subject=instance, detail=named)


@receiver(m2m_changed, sender=Group.permissions.through)
def _group_permissions_changed(
    sender: Any, instance: Any, action: str, reverse: bool, pk_set: set[int] | None, **kwargs: Any
) -> None:
    named = (
        None
        if reverse
        else _named_changes(action, pk_set, instance.permissions, Permission, "codename")
    )
    if named:
        audit.record(Event.PERMISSIONS_CHANGED, group=instance.name, detail=named)


@receiver(m2m_changed, sender=ChatModel.groups.through)
def _model_groups_changed(
    sender: Any, instance: Any, action: str, reverse: bool, pk_set: set[int] | None, **kwargs: Any
) -> None:
    named = None if reverse else _named_changes(action, pk_set, instance.groups, Group, "name")
    if named:
        audit.record(Event.MODEL_CHANGED, model=instance.slug, groups=named)


# Reverse changes (from the group's or the permission's side) are left out where the admin
# makes none: a user's groups and permissions, a group's permissions and a model's groups are
# each edited from the one side.
_CHANGES = {"post_add": "added", "post_remove": "removed", "pre_clear": "removed"}


def _named_changes(
    action: str, pk_set: set[int] | None, current: Any, related: Any, label: str
) -> dict[str, list[str]] | None:
    """{"added" or "removed": the names} for an m2m_changed: post_add and post_remove name their
    rows in pk_set; clear() names none, so at pre_clear the rows still there are what goes."""
    change = _CHANGES.get(action)
    if change is None:
        return None
    if action == "pre_clear":
        names = current.values_list(label, flat=True)
    elif pk_set:
        names = related.objects.filter(pk__in=pk_set).values_list(label, flat=True)
    else:
        return None
    listed = sorted(names)
    return {change: listed} if listed else None


@receiver(post_save, sender=ChatModel)
def _model_saved(sender: Any, instance: ChatModel, created: bool, **kwargs: Any) -> None:
    audit.record(
        Event.MODEL_CHANGED,
        model=instance.slug,
        action="created" if created else "changed",
        enabled=instance.enabled,
    )


@receiver(post_delete, sender=ChatModel)
def _model_deleted(sender: Any, instance: ChatModel, **kwargs: Any) -> None:
    audit.record(Event.MODEL_CHANGED, model=instance.slug, action="deleted")


@receiver(post_save, sender=Budget)
def _budget_saved(sender: Any, instance: Budget, created: bool, **kwargs: Any) -> None:
    _budget_changed(instance, "created" if created else "changed")


@receiver(post_delete, sender=Budget)
def _budget_deleted(sender: Any, instance: Budget, **kwargs: Any) -> None:
    _budget_changed(instance, "deleted")


def _budget_changed(budget: Budget, action: str) -> None:
    audit.record(
        Event.BUDGET_CHANGED,
        subject=budget.user,
        group=budget.group.name if budget.group is not None else None,
        action=action,
        tokens_per_day=budget.tokens_per_day,
        tokens_per_month=budget.tokens_per_month,
    )
