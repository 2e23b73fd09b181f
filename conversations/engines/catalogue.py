"""Which models a user can chat with: the declared ones (conversations.engines.specs), then the
rows managed in the admin, narrowed by the user's groups."""

from __future__ import annotations

import logging
import threading

from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.utils.translation import gettext as _

from conversations.engines import start_loading
from conversations.engines.specs import ModelSpec, ModelUnavailable, declared_models
from conversations.models import ChatModel
from conversations.types import AnyUser

logger = logging.getLogger("chatsite.engines")


def spec_of(row: ChatModel) -> ModelSpec:
    """An admin's row as the registry's ModelSpec (groups prefetched, or one query)."""
    return ModelSpec(
        slug=row.slug,
        name=row.name,
        backend=row.backend,
        model_id=row.model_id,
        options=dict(row.options or {}),
        context_tokens=row.context_tokens,
        system_prompt=row.system_prompt,
        temperature=row.temperature,
        max_tokens=row.max_tokens,
        max_temperature=row.max_temperature,
        max_tokens_limit=row.max_tokens_limit,
        vision=row.vision,
        tools=row.tools,
        groups=tuple(group.name for group in row.groups.all()) if row.pk else (),
        enabled=row.enabled,
        declared=False,
        api_key=row.api_key,
    )


def all_models() -> list[ModelSpec]:
    """Every model, enabled or not: the declared ones first, then the admin's rows."""
    declared = declared_models()
    taken = {spec.slug for spec in declared}
    rows = ChatModel.objects.exclude(slug__in=taken).prefetch_related("groups")
    return [*declared, *(spec_of(row) for row in rows)]


def _group_names(user: AnyUser) -> list[str]:
    if not user.is_authenticated:
        return []
    return list(user.groups.values_list("name", flat=True))


def models_for(user: AnyUser) -> list[ModelSpec]:
    """The models this user may chat with, in the picker's order (the first is the default)."""
    groups = _group_names(user)
    return [spec for spec in all_models() if spec.usable_by(user, groups)]


def model_for(user: AnyUser, slug: str = "") -> ModelSpec:
    """The model `slug` if this user may use it; with no slug, the user's default model.

    Raises ModelUnavailable otherwise (no such model, disabled, not for this user, or no model
    at all for them).
    """
    usable = models_for(user)
    if not slug:
        if not usable:
            raise ModelUnavailable(_("No model is available to you right now."))
        return usable[0]
    for spec in usable:
        if spec.slug == slug:
            return spec
    raise ModelUnavailable(_("The model %(slug)r is not available to you.") % {"slug": slug})


def start_loading_at_startup() -> None:
    """Start loading every enabled model as the process starts, on a thread (listing the admin's
    models reads the database, which the event loop may not do). A problem is logged (the
    system check has said what is wrong) and each send reports it to its user."""
    threading.Thread(target=_load_enabled_models, name="load-models", daemon=True).start()


def _load_enabled_models() -> None:
    try:
        specs = [spec for spec in all_models() if spec.enabled]
    except Exception:
        logger.exception("could not list the models to load")
        specs = [spec for spec in declared_models() if spec.enabled]
    finally:
        connection.close()
    for spec in specs:
        try:
            start_loading(spec)
        except ImproperlyConfigured as exc:
            logger.error("the model %s is not available: %s", spec.slug, exc)
