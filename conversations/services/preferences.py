"""A user's defaults for their new conversations: instructions (a system prompt) and a model.

The order a new conversation's settings come from, first set wins: a project's own (inside a
project), then the user's defaults, then the model's (ModelSpec.system_prompt and the first model
in the picker). A conversation's own settings, changed later, win over all of them.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

from conversations.engines import catalogue, specs
from conversations.models import UserPreferences
from conversations.types import User


def conversation_defaults(user: User) -> dict[str, str]:
    """The settings the user's new conversations start with (of services.conversations.SETTINGS):
    their default model while they may still use it, and their instructions; {} for none."""
    preferences = UserPreferences.objects.filter(user=user).first()
    if preferences is None:
        return {}
    defaults = {}
    if preferences.default_model_slug and any(
        spec.slug == preferences.default_model_slug for spec in catalogue.models_for(user)
    ):
        defaults["model_slug"] = preferences.default_model_slug
    if preferences.default_instructions:
        defaults["system_prompt"] = preferences.default_instructions
    return defaults


def defaults_set(*, user: User, model_slug: str, instructions: str) -> UserPreferences:
    """Save the user's defaults for new conversations ("" for the model's own).

    Raises ValidationError naming the field refused: a model not for them, instructions too long.
    """
    errors = {}
    if model_slug:
        try:
            catalogue.model_for(user, model_slug)
        except specs.ModelUnavailable:
            errors["default_model"] = _("This model is not available to you.")
    instructions = instructions.replace("\r\n", "\n")  # a textarea's line breaks
    if len(instructions) > specs.MAX_SYSTEM_PROMPT_CHARS:
        errors["default_instructions"] = _("Instructions are limited to %(limit)d characters.") % {
            "limit": specs.MAX_SYSTEM_PROMPT_CHARS
        }
    if errors:
        raise ValidationError(errors)
    preferences, _created = UserPreferences.objects.update_or_create(
        user=user,
        defaults={"default_model_slug": model_slug, "default_instructions": instructions},
    )
    return preferences
