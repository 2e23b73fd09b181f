"""Typed readers for settings that come from the environment.

Every setting chatsite reads from the environment goes through one of these helpers, so a bad
value fails at start-up with a message that names the variable and says what was expected.
"""

import json
import os
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(
        f"{name} must be one of 1/0, true/false, yes/no, on/off; got {raw!r}."
    )


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number; got {raw!r}.") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}; got {value}.")
    return value


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number; got {raw!r}.") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}; got {value}.")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_origins(name: str) -> list[str]:
    """A comma-separated list of web origins, each exactly scheme://host[:port] (no path, no
    trailing slash), as browsers send them in an Origin header."""
    origins = env_list(name, [])
    for origin in origins:
        try:
            parts = urlsplit(origin)
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number
        except ValueError:
            parts = None
        if (
            parts is None
            or parts.scheme not in ("http", "https")
            or not parts.hostname
            or origin != f"{parts.scheme}://{parts.netloc}"
            or parts.username is not None
        ):
            raise ImproperlyConfigured(
                f"{name} must be origins such as https://chat.example.com or "
                f"http://localhost:3000 (scheme and host, an optional port, nothing after); "
                f"got {origin!r}."
            )
    return origins


def env_json_object(name: str) -> dict[str, Any]:
    """A JSON object (empty when unset), for settings passed through to another library."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return {}
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be a JSON object; {exc}.") from None
    if not isinstance(value, dict):
        raise ImproperlyConfigured(f"{name} must be a JSON object; got {raw!r}.")
    return value
