"""Writes on conversations that are not about generating a reply."""

import math
import time
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.shortcuts import get_object_or_404
from django.utils.translation import gettext as _

from conversations.engines import catalogue, specs
from conversations.events import broadcast
from conversations.events.protocol import Cancel, Deleted
from conversations.models import Conversation, ConversationQuerySet, Project
from conversations.services.preferences import conversation_defaults
from conversations.types import AnyUser, ConversationId, User

MAX_TITLE = 200


def conversation_visible(*, user: AnyUser, conversation_id: ConversationId) -> Conversation | None:
    """The user's conversation with this id; None for a stranger's as for a missing one."""
    return Conversation.objects.visible_to(user).filter(pk=conversation_id).first()


def conversation_or_404(
    *,
    user: AnyUser,
    conversation_id: ConversationId,
    queryset: ConversationQuerySet | None = None,
) -> Conversation:
    """The user's conversation with this id, read from `queryset` (all conversations unless
    given, e.g. with its messages prefetched).

    Raises Http404 for a stranger's conversation as for a missing one: an id tells nobody
    whether it exists.
    """
    conversations = Conversation.objects.all() if queryset is None else queryset
    return get_object_or_404(conversations.visible_to(user), pk=conversation_id)


def conversation_create(
    *, owner: User, title: str = "", project: Project | None = None, temporary: bool = False
) -> Conversation:
    """A new conversation; one in a project starts with the project's model and settings,
    then the owner's defaults for what the project leaves unset (services.preferences says the
    order); a temporary one is deleted once unused (see generation.temporary)."""
    inherited: dict[str, Any] = dict(conversation_defaults(owner))
    if project is not None:
        own = {name: getattr(project, name) for name in SETTINGS}
        inherited |= {name: value for name, value in own.items() if value not in (None, "")}
    return Conversation.objects.create(
        owner=owner,
        title=title.strip()[:MAX_TITLE],
        project=project,
        temporary=temporary,
        **inherited,
    )


def conversation_take_defaults(*, conversation: Conversation) -> Conversation:
    """An unused conversation (no message yet) offered again by New starts afresh: with the
    owner's defaults as they are now, over a model picked in it before."""
    changed = {
        name: value
        for name, value in conversation_defaults(conversation.owner).items()
        if getattr(conversation, name) != value
    }
    if changed:
        for name, value in changed.items():
            setattr(conversation, name, value)
        conversation.save(update_fields=[*changed, "updated_at"])
    return conversation


def conversation_rename(*, conversation: Conversation, title: str) -> Conversation:
    """Give the conversation its owner's title, which no written title replaces. Its date stays:
    the sidebar lists by updated_at, and a new name is no new activity (an UPDATE, which unlike
    save() leaves auto_now alone)."""
    conversation.title = title.strip()[:MAX_TITLE]
    conversation.title_is_custom = True
    Conversation.objects.filter(pk=conversation.pk).update(
        title=conversation.title, title_is_custom=True
    )
    return conversation


# What conversation_configure may change; None for the last three means "the model's default".
SETTINGS = ("model_slug", "system_prompt", "temperature", "max_tokens")


def conversation_configure(
    *, conversation: Conversation, user: AnyUser, changes: dict[str, Any]
) -> Conversation:
    """Change the conversation's model and its settings for the next replies.

    Each value is checked against the bounds of the model the conversation will have; a
    ValidationError maps each field that is refused to what is wrong with it.
    """
    spec = checked_settings(user=user, current_slug=conversation.model_slug, changes=changes)
    for name, value in changes.items():
        setattr(conversation, name, value)
    conversation.model_slug = spec.slug
    conversation.save(update_fields=[*SETTINGS, "updated_at"])
    return conversation


def checked_settings(
    *, user: AnyUser, current_slug: str, changes: dict[str, Any]
) -> specs.ModelSpec:
    """The model that `changes` (of SETTINGS) leave in place of `current_slug`, once each value
    is checked against its bounds; normalises `changes` in place (a system prompt's line breaks).

    Raises ValidationError mapping each refused field to what is wrong with it.
    """
    unknown = set(changes) - set(SETTINGS)
    if unknown:
        raise ValueError(f"not settings: {', '.join(sorted(unknown))}")
    try:
        spec = catalogue.model_for(user, changes.get("model_slug", current_slug))
    except specs.ModelUnavailable as exc:
        raise ValidationError({"model_slug": str(exc)}) from None
    errors = {}
    temperature = changes.get("temperature")
    if temperature is not None and not (
        math.isfinite(temperature) and 0 <= temperature <= spec.max_temperature
    ):
        errors["temperature"] = _("%(model)s takes a temperature from 0 to %(most)s.") % {
            "model": spec.name,
            "most": f"{spec.max_temperature:g}",
        }
    max_tokens = changes.get("max_tokens")
    if max_tokens is not None and not 1 <= max_tokens <= spec.max_tokens_limit:
        errors["max_tokens"] = _("%(model)s writes replies of 1 to %(most)d tokens.") % {
            "model": spec.name,
            "most": spec.max_tokens_limit,
        }
    system_prompt = changes.get("system_prompt")
    if system_prompt is not None:
        # A form's textarea sends CRLF line breaks; the API and the engines expect "\n".
        system_prompt = changes["system_prompt"] = system_prompt.replace("\r\n", "\n")
    if system_prompt is not None and len(system_prompt) > specs.MAX_SYSTEM_PROMPT_CHARS:
        errors["system_prompt"] = _("System prompts are limited to %(most)d characters.") % {
            "most": specs.MAX_SYSTEM_PROMPT_CHARS
        }
    if errors:
        raise ValidationError(errors)
    return spec


def conversation_delete(*, conversation: Conversation) -> None:
    """Delete a conversation and stop its running reply, so no engine works for a deleted row.

    The generation would notice anyway at its next flush (its row is gone); the Stop makes it now.
    """
    group = conversation.group_name
    conversation.delete()
    stop = Cancel(message_id=None, requested_at=time.time(), cancelled_by="deleted")

    def tell_the_group() -> None:
        broadcast.to_group_from_sync(group, stop)
        broadcast.to_group_from_sync(group, Deleted(message_id=None))

    transaction.on_commit(tell_the_group)


def conversation_model(*, conversation: Conversation) -> str:
    """The model the conversation's next reply uses, as saved now ("" for the default)."""
    slug: str | None = (
        Conversation.objects.filter(pk=conversation.pk).values_list("model_slug", flat=True).first()
    )
    return slug or ""
