"""System checks: settings that would only fail at the first send are refused at start-up."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, register

from conversations.engines import check_engine_setting


@register()
def engine_setting_check(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    problem = check_engine_setting()
    if problem is None:
        return []
    return [Error(problem, hint="Set CHAT_ENGINE in the environment.", id="chatsite.E001")]
