"""Writes that organise conversations: projects (create, change, delete), and moving, pinning
and archiving a conversation. None of them moves a conversation's updated_at: organising a
conversation is not activity in it, and the sidebar dates it by its last message."""

from typing import Any

from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import transaction
from django.shortcuts import get_object_or_404
from django.utils.translation import gettext as _

from conversations.models import Conversation, Project
from conversations.services.conversations import (
    SETTINGS,
    checked_settings,
    conversation_delete,
)
from conversations.types import AnyUser, User

MAX_NAME = 100


def project_or_404(*, user: AnyUser, project_id: int, writable: bool = True) -> Project:
    """The user's project with this id (or, unless `writable`, one shared with a group of
    theirs). Raises Http404 for anyone else's as for a missing one."""
    projects = Project.objects.owned_by(user) if writable else Project.objects.visible_to(user)
    return get_object_or_404(projects, pk=project_id)


def _clean_name(name: str) -> str:
    name = " ".join(name.split())[:MAX_NAME]
    if not name:
        raise ValidationError({"name": _("Name the project.")})
    return name


def _check_group(owner: User, group: Group | None) -> None:
    # Sharing with a group one is not in would hand one's conversations to strangers.
    if group is not None and not owner.groups.filter(pk=group.pk).exists():
        raise ValidationError({"shared_with": _("Share only with a group you are in.")})


def project_create(
    *,
    owner: User,
    name: str,
    settings: dict[str, Any] | None = None,
    shared_with: Group | None = None,
) -> Project:
    """A new project; `settings` (of services.conversations.SETTINGS) are checked against the
    bounds of its model, as a conversation's are. Raises ValidationError field by field."""
    project = Project(owner=owner, name=_clean_name(name))
    return _apply(project, owner, settings or {}, shared_with)


def project_change(
    *,
    project: Project,
    name: str,
    settings: dict[str, Any],
    shared_with: Group | None,
) -> Project:
    """Rename it, change what its new conversations start with, or whom it is shared with.
    Its conversations keep their own settings."""
    project.name = _clean_name(name)
    return _apply(project, project.owner, settings, shared_with)


def _apply(
    project: Project, owner: User, settings: dict[str, Any], shared_with: Group | None
) -> Project:
    changes = dict(settings)
    spec = checked_settings(user=owner, current_slug=project.model_slug, changes=changes)
    _check_group(owner, shared_with)
    for name, value in changes.items():
        setattr(project, name, value)
    project.model_slug = spec.slug
    project.shared_with = shared_with
    project.save()
    return project


def project_settings(project: Project) -> dict[str, Any]:
    return {name: getattr(project, name) for name in SETTINGS}


def project_delete(*, project: Project, keep_conversations: bool) -> int:
    """Delete a project; its conversations are kept (out of any project) or deleted, each
    as conversation_delete does (its running reply stopped). Returns how many were deleted."""
    with transaction.atomic():
        deleted = 0
        if not keep_conversations:
            for conversation in project.conversations.all():
                conversation_delete(conversation=conversation)
                deleted += 1
        project.delete()  # on_delete=SET_NULL takes the kept ones out of it
    return deleted


def project_unused_conversation(*, project: Project) -> Conversation | None:
    """An untouched conversation of the project's (no message, no title), brought up to the
    project's settings as they are now, to offer again rather than make another; or None."""
    unused = (
        Conversation.objects.filter(project=project, title="", archived=False)
        .empty()
        .newest_first()
        .first()
    )
    if unused is not None:
        settings = project_settings(project)
        Conversation.objects.filter(pk=unused.pk).update(**settings)
        for name, value in settings.items():
            setattr(unused, name, value)
    return unused


def conversation_move(*, conversation: Conversation, project: Project | None) -> None:
    """Put the conversation in `project` (one of its owner's), or out of any with None."""
    if project is not None and project.owner_id != conversation.owner_id:
        raise ValidationError({"project": _("Move it only into a project of yours.")})
    Conversation.objects.filter(pk=conversation.pk).update(project=project)
    conversation.project = project


def conversation_pin(*, conversation: Conversation, pinned: bool) -> None:
    Conversation.objects.filter(pk=conversation.pk).update(pinned=pinned)
    conversation.pinned = pinned


def conversation_archive(*, conversation: Conversation, archived: bool) -> None:
    Conversation.objects.filter(pk=conversation.pk).update(archived=archived)
    conversation.archived = archived
