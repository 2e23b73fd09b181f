"""What a model users can chat with is (a ModelSpec), and the ones declared in the environment.

A model is a `ModelSpec`: the name users see, an engine backend with its settings, the model id,
the context window, the default system prompt and sampling, and who may use it. Specs come from

- `CHAT_MODELS`: a JSON list of objects (or the path of a file holding one), for deployments
  configured without admin clicks, and for tests; a bad entry stops start-up naming it;
- without `CHAT_MODELS`, one model named "default" made from the single-engine settings
  (`CHAT_ENGINE`, `CHAT_SYSTEM_PROMPT`, ...), so deployments from before keep working;
- `ChatModel` rows, added and changed in the admin (their slugs may not repeat a declared one).

An upstream API key is named by the environment variable that holds it (`options.api_key_env`),
or typed into the admin, which stores it encrypted (`api_key`, never shown in a repr).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.core.validators import validate_slug
from django.dispatch import receiver

from conversations.engines.backends import BACKEND_OPTIONS, BACKENDS

if TYPE_CHECKING:  # imported at run time, it would load the auth models before Django is set up
    from conversations.types import AnyUser

# What a conversation may ask for, whatever the model allows.
MAX_SYSTEM_PROMPT_CHARS = 8000
DEFAULT_SLUG = "default"


@dataclass(frozen=True)
class ModelSpec:
    slug: str
    name: str
    backend: str
    model_id: str = ""  # the engine's own name for it: a GGUF path, a served model, a HF id
    options: Mapping[str, Any] = field(default_factory=dict)  # the backend's own settings
    context_tokens: int = 2048
    system_prompt: str = ""
    temperature: float = 0.7
    max_tokens: int = 512
    max_temperature: float = 2.0  # what a conversation may set, at most
    max_tokens_limit: int = 4096
    groups: tuple[str, ...] = ()  # group names that may use it; empty: everyone signed in
    enabled: bool = True
    vision: bool = False  # it reads images: attached images go to it as image parts
    tools: bool = False  # it calls tools: an API call's `tools` are passed on to it
    declared: bool = True  # from the environment (False: an admin row)
    api_key: str = field(default="", repr=False)  # an admin row's stored key ("": none)
    # Its name is only its backend's: the replies it writes are labelled with the model the
    # server serves (engines.shown_name), CHAT_ENGINE=openai without a model or CHAT_MODEL_NAME.
    named_by_server: bool = False

    @property
    def engine_key(self) -> str:
        """Names the engine built for this spec: a change to what the engine is built from
        (an admin edit) gives a new key, hence a new engine."""
        built_from = {
            "slug": self.slug,
            "backend": self.backend,
            "model_id": self.model_id,
            "options": self.options,
            "context_tokens": self.context_tokens,
            # A changed key is a new engine; the digest, not the key, goes into the name.
            "api_key": hashlib.sha256(self.api_key.encode()).hexdigest() if self.api_key else "",
        }
        digest = hashlib.sha256(json.dumps(built_from, sort_keys=True, default=str).encode())
        return f"{self.slug}:{digest.hexdigest()[:12]}"

    def option(self, name: str, default: Any) -> Any:
        return self.options.get(name, default)

    def usable_by(self, user: AnyUser, user_groups: Iterable[str]) -> bool:
        if not (self.enabled and user.is_authenticated):
            return False
        return not self.groups or bool(set(self.groups) & set(user_groups))


@dataclass(frozen=True)
class ReplySettings:
    """What one reply is generated with: a model and a conversation's choices within it."""

    system_prompt: str
    temperature: float
    max_tokens: int


class ModelUnavailable(Exception):
    """A model that does not exist, is disabled, or is not for this user."""


# The spec fields a declaration may set, and the JSON types each takes.
_FIELDS: dict[str, tuple[type, ...]] = {
    "slug": (str,),
    "name": (str,),
    "backend": (str,),
    "model": (str,),
    "options": (dict,),
    "context_tokens": (int,),
    "system_prompt": (str,),
    "temperature": (int, float),
    "max_tokens": (int,),
    "max_temperature": (int, float),
    "max_tokens_limit": (int,),
    "groups": (list,),
    "enabled": (bool,),
    "vision": (bool,),
    "tools": (bool,),
}
# The backends that hand images to their engine: an OpenAI-compatible server (vLLM's among them)
# takes them as image content parts; the scripted engine keeps them for tests to read. The
# in-process vllm and llamacpp backends render text prompts only.
IMAGE_BACKENDS = frozenset({"openai", "scripted"})
# The backends that pass tools on and read the calls back: an OpenAI-compatible server (vLLM's
# with its tool parser, llama.cpp's with its chat template) parses the model's calls itself; the
# scripted engine makes calls for tests. The in-process backends have no tool parser here.
TOOL_BACKENDS = frozenset({"openai", "scripted"})


def spec_problems(spec: ModelSpec) -> list[str]:
    """What is wrong with a spec, whichever way it was made (a declaration, an admin form)."""
    problems = []
    if spec.backend not in BACKENDS:
        problems.append(f"backend {spec.backend!r} is not one of {', '.join(BACKENDS)}")
    problems.extend(option_problems(spec.backend, spec.options))
    if spec.context_tokens < 256:
        problems.append("context_tokens must be at least 256")
    if not 1 <= spec.max_tokens <= spec.max_tokens_limit:
        problems.append("max_tokens must be between 1 and max_tokens_limit")
    if not (math.isfinite(spec.temperature) and 0 <= spec.temperature <= spec.max_temperature):
        problems.append("temperature must be between 0 and max_temperature")
    if spec.vision and spec.backend not in IMAGE_BACKENDS:
        problems.append(
            f"vision needs a backend that passes images on ({', '.join(sorted(IMAGE_BACKENDS))})"
        )
    if spec.tools and spec.backend not in TOOL_BACKENDS:
        problems.append(
            f"tools needs a backend that passes tools on ({', '.join(sorted(TOOL_BACKENDS))})"
        )
    if len(spec.system_prompt) > MAX_SYSTEM_PROMPT_CHARS:
        problems.append(f"system_prompt is limited to {MAX_SYSTEM_PROMPT_CHARS} characters")
    return problems


def option_problems(backend: str, options: Mapping[str, Any]) -> list[str]:
    """What is wrong with a backend's options: ones it does not read, values of the wrong type."""
    known = BACKEND_OPTIONS.get(backend)
    if known is None:
        return []  # an unknown backend is reported once, by spec_problems
    problems = []
    unknown = sorted(set(options) - set(known))
    if unknown:
        problems.append(
            f"the {backend} backend has no option {', '.join(map(repr, unknown))} "
            f"(it reads {', '.join(known) or 'none'})"
        )
    for name, value in options.items():
        types = known.get(name)
        if types and (
            not isinstance(value, types) or (isinstance(value, bool) and bool not in types)
        ):
            problems.append(f"the option {name!r} has the wrong type ({value!r})")
    return problems


def _declared_spec(entry: object, where: str) -> ModelSpec:
    if not isinstance(entry, dict):
        raise ImproperlyConfigured(f"{where} must be a JSON object.")
    name = f"{where} ({entry.get('slug')!r})" if "slug" in entry else where
    unknown = sorted(set(entry) - set(_FIELDS))
    if unknown:
        raise ImproperlyConfigured(f"{name}: unknown field(s) {', '.join(unknown)}.")
    for key in ("slug", "backend"):
        if key not in entry:
            raise ImproperlyConfigured(f"{name}: {key!r} is required.")
    for key, value in entry.items():
        # bool is an int to Python, but never a number of tokens.
        if not isinstance(value, _FIELDS[key]) or (
            isinstance(value, bool) and bool not in _FIELDS[key]
        ):
            raise ImproperlyConfigured(f"{name}: {key!r} has the wrong type ({value!r}).")
    try:
        validate_slug(entry["slug"])
    except Exception:
        raise ImproperlyConfigured(f"{name}: the slug may hold letters, digits, - and _.") from None
    values = {("model_id" if key == "model" else key): value for key, value in entry.items()}
    values["groups"] = tuple(str(group) for group in values.get("groups", ()))
    values.setdefault("name", entry["slug"])
    spec = ModelSpec(**values)
    problems = spec_problems(spec)
    if problems:
        raise ImproperlyConfigured(f"{name}: {'; '.join(problems)}.")
    return spec


def _read_declarations(raw: str) -> list[object]:
    text = raw.strip()
    if not text.startswith("["):
        path = Path(text)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ImproperlyConfigured(
                f"CHAT_MODELS names a file that cannot be read: {exc}."
            ) from None
    try:
        entries = json.loads(text)
    except ValueError as exc:
        raise ImproperlyConfigured(f"CHAT_MODELS is not valid JSON: {exc}.") from None
    if not isinstance(entries, list) or not entries:
        raise ImproperlyConfigured("CHAT_MODELS must be a non-empty JSON list of models.")
    return entries


def legacy_spec(backend: str | None = None) -> ModelSpec:
    """The one model of the single-engine settings (CHAT_ENGINE and the CHAT_<BACKEND>_* ones)."""
    backend = backend or settings.CHAT_ENGINE
    model_id = {
        "llamacpp": settings.CHAT_MODEL_PATH,
        "openai": settings.CHAT_OPENAI_MODEL,
        "vllm": settings.CHAT_VLLM_MODEL,
    }.get(backend, "")
    return ModelSpec(
        slug=DEFAULT_SLUG,
        name=settings.CHAT_MODEL_NAME or _default_name(backend, model_id),
        named_by_server=backend == "openai" and not (settings.CHAT_MODEL_NAME or model_id),
        backend=backend,
        model_id=model_id,
        context_tokens=(
            settings.CHAT_VLLM_MAX_MODEL_LEN if backend == "vllm" else settings.CHAT_CONTEXT_TOKENS
        ),
        system_prompt=settings.CHAT_SYSTEM_PROMPT,
        temperature=settings.CHAT_TEMPERATURE,
        max_tokens=settings.CHAT_MAX_TOKENS,
        max_tokens_limit=max(settings.CHAT_MAX_TOKENS, 4096),
    )


def _default_name(backend: str, model_id: str) -> str:
    if model_id:
        return Path(model_id).name.removesuffix(".gguf")
    return {"llamacpp": "SmolLM2 135M (embedded)", "scripted": "Scripted"}.get(backend, backend)


@cache
def declared_models() -> tuple[ModelSpec, ...]:
    """The models of the environment, checked once; ImproperlyConfigured names a bad entry."""
    if not settings.CHAT_MODELS.strip():
        return (legacy_spec(),)
    specs = tuple(
        _declared_spec(entry, f"CHAT_MODELS[{index}]")
        for index, entry in enumerate(_read_declarations(settings.CHAT_MODELS))
    )
    slugs = [spec.slug for spec in specs]
    repeated = sorted({slug for slug in slugs if slugs.count(slug) > 1})
    if repeated:
        raise ImproperlyConfigured(f"CHAT_MODELS repeats the slug(s) {', '.join(repeated)}.")
    return specs


@receiver(setting_changed)
def _forget_declarations(*, setting: str, **kwargs: Any) -> None:
    # Tests change settings; the legacy model is read from many of them.
    if setting.startswith("CHAT_"):
        declared_models.cache_clear()


def reply_settings(
    spec: ModelSpec,
    *,
    system_prompt: str | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
) -> ReplySettings:
    """A conversation's choices (None: the model's default) kept within the model's bounds: a
    conversation set for another model may ask for more than this one allows."""
    return ReplySettings(
        system_prompt=spec.system_prompt if system_prompt is None else system_prompt,
        temperature=min(
            spec.temperature if temperature is None else temperature, spec.max_temperature
        ),
        max_tokens=min(
            spec.max_tokens if max_tokens is None else max_tokens, spec.max_tokens_limit
        ),
    )
