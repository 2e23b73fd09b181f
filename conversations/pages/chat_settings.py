"""A conversation's "Model and settings": the models in the composer's picker, the settings form
and what the page shows of them. The picker is the one place a model is chosen; the settings
panel's summary follows it (the picker posts to conversation_model_view, which sends the panel
back), and the panel saves in place (htmx) or, without JavaScript, by a page load."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.utils.translation import gettext as _

from conversations import engines
from conversations.engines import catalogue, specs
from conversations.models import Conversation
from conversations.pages.forms import ConversationSettingsForm
from conversations.types import AnyUser


@dataclass(frozen=True)
class ModelChoice:
    """A model in the picker, with how its engine stands in this process."""

    spec: specs.ModelSpec
    state: str  # engines.load_state: ready, loading, failed, idle

    @property
    def name(self) -> str:
        return engines.shown_name(self.spec)

    @property
    def note(self) -> str:
        return {"loading": _("loading…"), "failed": _("unavailable")}.get(self.state, "")


def model_choices(user: AnyUser) -> list[ModelChoice]:
    return [ModelChoice(spec, engines.load_state(spec)) for spec in catalogue.models_for(user)]


def current_choice(choices: list[ModelChoice], conversation: Conversation) -> ModelChoice | None:
    """The conversation's model; for a new conversation, or one whose model is gone, the
    default (the first)."""
    current = next((c for c in choices if c.spec.slug == conversation.model_slug), None)
    return current or (choices[0] if choices else None)


def settings_context(
    user: AnyUser,
    conversation: Conversation,
    form: ConversationSettingsForm | None = None,
    *,
    saved: bool = False,
    problem: str = "",
) -> dict[str, Any]:
    """What _settings.html (and the composer's picker) read; `form`: one with errors to show,
    `problem`: what refused a model picked in the composer."""
    choices = model_choices(user)
    current = current_choice(choices, conversation)
    if form is None:
        form = ConversationSettingsForm(
            initial={
                "model": current.spec.slug if current else "",
                "system_prompt": conversation.system_prompt or "",
                "temperature": conversation.temperature,
                "max_tokens": conversation.max_tokens,
            }
        )
    return {
        "conversation": conversation,
        "model_choices": choices,
        "current_model": current,
        "settings_form": form,
        "settings_saved": saved,
        "settings_problem": problem,
    }
