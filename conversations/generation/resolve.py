"""A send's first step: the model and engine that write its reply, and the reply's settings.

Nothing is written here; a model or engine that is not available refuses the send before it is.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, TypeVar

from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext as _

from conversations.engines import catalogue, get_engine, specs
from conversations.engines.base import Engine
from conversations.models import Conversation
from conversations.services.errors import EngineUnavailable, ModelUnavailable
from conversations.types import AnyUser, User

logger = logging.getLogger("chatsite.generation")

T = TypeVar("T")


@dataclass(frozen=True)
class CallSettings:
    """One API call's own settings (the OpenAI-compatible gateway), for its reply only: each set
    one wins over the conversation's, within the model's bounds as the conversation's are."""

    system_prompt: str | None = None  # None: the conversation's
    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    # The caller's tools and tool_choice, in OpenAI's shape (see engines.base.SamplingParams).
    tools: tuple[dict[str, Any], ...] = ()
    tool_choice: str | dict[str, Any] | None = None
    title_by_model: bool = True  # see ReplyPlan.title_by_model


@dataclass(frozen=True)
class Resolved:
    """What writes a send's reply, and with what."""

    model: specs.ModelSpec
    engine: Engine
    settings: specs.ReplySettings


def resolve(*, owner: User, chosen: Conversation, model_slug: str, call: CallSettings) -> Resolved:
    """The model `model_slug` (or the conversation's), its engine, and the reply's settings: the
    call's, else the conversation's (`chosen`: its row as read for the send), within that
    model's bounds. Refuses a model not for `owner`, an engine that cannot be built."""
    model = _available_model(owner, model_slug or chosen.model_slug)
    engine = _available_engine(model)
    used = specs.reply_settings(
        model,
        system_prompt=_first_set(call.system_prompt, chosen.system_prompt),
        temperature=_first_set(call.temperature, chosen.temperature),
        max_tokens=_first_set(call.max_tokens, chosen.max_tokens),
    )
    return Resolved(model=model, engine=engine, settings=used)


def _first_set(*values: T | None) -> T | None:
    return next((value for value in values if value is not None), None)


def _available_model(owner: AnyUser, slug: str) -> specs.ModelSpec:
    try:
        return catalogue.model_for(owner, slug)
    except specs.ModelUnavailable as exc:
        raise ModelUnavailable(
            _("%(why)s Pick another model; your message was not sent.") % {"why": exc}
        ) from None


def _available_engine(spec: specs.ModelSpec) -> Engine:
    """The model's engine, or a refusal the sender can read (the socket stays open)."""
    try:
        return get_engine(spec)
    except ImproperlyConfigured as exc:
        logger.error("the model %s is not available: %s", spec.slug, exc)
        raise EngineUnavailable(
            _("The model is not available right now. Your message was not sent; try again later.")
        ) from None
