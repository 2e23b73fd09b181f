"""Models declared for tests (CHAT_MODELS), used through the two_models fixture."""

from __future__ import annotations

# Two scripted models that differ in what the engine can see: their name, system prompt and
# sampling defaults; a third only for the "reviewers" group.
MODELS = [
    {
        "slug": "quick",
        "name": "Quick",
        "backend": "scripted",
        "model": "quick-1",
        "options": {"tokens": 5, "delay_ms": 1},
        "system_prompt": "Answer quickly.",
        "temperature": 0.2,
        "max_tokens": 64,
        "max_tokens_limit": 128,
        "max_temperature": 1.0,
    },
    {
        "slug": "careful",
        "name": "Careful",
        "backend": "scripted",
        "model": "careful-1",
        "options": {"tokens": 7, "delay_ms": 1},
        "system_prompt": "Think it through.",
        "temperature": 0.9,
        "max_tokens": 256,
    },
    {
        "slug": "internal",
        "name": "Internal",
        "backend": "scripted",
        "options": {"tokens": 3, "delay_ms": 1},
        "groups": ["reviewers"],
    },
]
