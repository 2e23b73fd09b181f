"""Writes of the prompt library: create, change and delete a user's saved prompts.

Every write is checked here, for the page and the REST API alike: a title, a text no longer than
a message may be (CHAT_MAX_PROMPT_CHARS), variables named as `{{name}}` expects, and a group the
owner belongs to. A prompt's text is never rendered as a template: its variables are replaced as
plain text by the composer (static/chatsite/prompts.js), so a value cannot inject anything.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

from conversations.models import SavedPrompt
from conversations.models.prompts import VARIABLE, VARIABLE_NAME, variables_in
from conversations.types import User

MAX_TITLE = 100
MAX_VARIABLE_NAME = 40
MAX_VARIABLES = 20
# Enough for a team's library; the composer's list loads them all at once.
MAX_PROMPTS_PER_USER = 500


def prompt_create(*, owner: User, title: str, text: str, group: Group | None = None) -> SavedPrompt:
    """A new saved prompt of `owner`'s; ValidationError (by field) when a value is refused."""
    if SavedPrompt.objects.owned_by(owner).count() >= MAX_PROMPTS_PER_USER:
        raise ValidationError(
            _("You have %(n)d saved prompts, the most one may keep: delete one to save another.")
            % {"n": MAX_PROMPTS_PER_USER},
            code="too_many_prompts",
        )
    prompt = SavedPrompt(owner=owner)
    _apply(prompt, title=title, text=text, group=group)
    prompt.save()
    return prompt


def prompt_update(
    *, prompt: SavedPrompt, title: str, text: str, group: Group | None
) -> SavedPrompt:
    """Change a prompt (its owner's only: callers look it up with `owned_by`)."""
    _apply(prompt, title=title, text=text, group=group)
    prompt.save()
    return prompt


def prompt_delete(*, prompt: SavedPrompt) -> None:
    prompt.delete()


def _apply(prompt: SavedPrompt, *, title: str, text: str, group: Group | None) -> None:
    errors: dict[str, list[str]] = {}
    title = title.strip()
    if not title:
        errors["title"] = [_("Give the prompt a title.")]
    elif len(title) > MAX_TITLE:
        errors["title"] = [
            _("A title has at most %(most)d characters; this one has %(n)d.")
            % {"most": MAX_TITLE, "n": len(title)}
        ]
    text_errors = text_problems(text)
    if text_errors:
        errors["text"] = text_errors
    if group is not None and not prompt.owner.groups.filter(pk=group.pk).exists():
        errors["group"] = [_("Share it with one of your own groups.")]
    if errors:
        raise ValidationError(errors)
    prompt.title, prompt.text, prompt.group = title, text, group


def text_problems(text: str) -> list[str]:
    """What is wrong with a prompt's text, in words for its author; empty when it may be saved."""
    if not text.strip():
        return [_("Write the prompt's text.")]
    if "\x00" in text:
        return [_("The text holds a NUL character, which cannot be stored.")]
    limit = settings.CHAT_MAX_PROMPT_CHARS
    if len(text) > limit:
        return [f"A prompt has at most {limit} characters, as a message; this one has {len(text)}."]
    bad = [name for name in VARIABLE.findall(text) if not _good_name(name)]
    if bad:
        shown = ", ".join("{{" + name + "}}" for name in dict.fromkeys(bad))
        return [
            f"Variables are named with letters, digits and _, starting with a letter, up to "
            f"{MAX_VARIABLE_NAME} characters, as {{{{topic}}}}: not {shown}."
        ]
    if len(variables_in(text)) > MAX_VARIABLES:
        return [f"A prompt has at most {MAX_VARIABLES} different variables."]
    return []


def _good_name(name: str) -> bool:
    return len(name) <= MAX_VARIABLE_NAME and VARIABLE_NAME.fullmatch(name) is not None
