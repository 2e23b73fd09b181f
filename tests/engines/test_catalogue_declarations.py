"""CHAT_MODELS: what a deployment declares, what a bad declaration says, and who sees what."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import ImproperlyConfigured

from conversations.engines.catalogue import model_for, models_for
from conversations.engines.specs import ModelUnavailable, declared_models, reply_settings
from conversations.models import ChatModel
from tests.support.chat_models import MODELS
from tests.support.servers import ROOT


def test_it_reads_the_declared_models_in_order(two_models: Any) -> None:
    assert list(two_models) == ["quick", "careful", "internal"]
    quick = two_models["quick"]
    assert (quick.name, quick.backend, quick.model_id) == ("Quick", "scripted", "quick-1")
    assert quick.options == {"tokens": 5, "delay_ms": 1}
    assert two_models["internal"].groups == ("reviewers",)


def test_it_reads_them_from_a_file(settings: Any, tmp_path: Path) -> None:
    path = tmp_path / "models.json"
    path.write_text(json.dumps(MODELS[:1]))
    settings.CHAT_MODELS = str(path)
    assert [spec.slug for spec in declared_models()] == ["quick"]


def test_without_declarations_the_single_engine_settings_make_one_model(settings: Any) -> None:
    settings.CHAT_MODELS = ""
    settings.CHAT_SYSTEM_PROMPT = "Be kind."
    settings.CHAT_MAX_TOKENS = 99
    (default,) = declared_models()
    assert (default.slug, default.backend) == ("default", "scripted")
    assert (default.system_prompt, default.max_tokens) == ("Be kind.", 99)


@pytest.mark.parametrize(
    ("declaration", "message"),
    [
        ("[", "CHAT_MODELS is not valid JSON"),
        ("[]", "non-empty JSON list"),
        ('[{"slug": "a"}]', r"CHAT_MODELS\[0\] \('a'\): 'backend' is required"),
        ('[{"slug": "a", "backend": "gpt9"}]', r"CHAT_MODELS\[0\] \('a'\): backend 'gpt9'"),
        ('[{"slug": "a b", "backend": "scripted"}]', "the slug may hold"),
        ('[{"slug": "a", "backend": "scripted", "colour": 1}]', "unknown field"),
        (
            '[{"slug": "a", "backend": "scripted", "max_tokens": true}]',
            "'max_tokens' has the wrong",
        ),
        (
            '[{"slug": "a", "backend": "scripted", "max_tokens": 900, "max_tokens_limit": 800}]',
            "max_tokens must be between",
        ),
        (
            '[{"slug": "a", "backend": "scripted"}, {"slug": "a", "backend": "openai"}]',
            "repeats the slug",
        ),
        ("/no/such/models.json", "names a file that cannot be read"),
    ],
)
def test_a_bad_declaration_is_named(settings: Any, declaration: str, message: str) -> None:
    settings.CHAT_MODELS = declaration
    with pytest.raises(ImproperlyConfigured, match=message):
        declared_models()


def test_a_bad_declaration_stops_start_up() -> None:
    env = {
        **os.environ,
        "CHAT_MODELS": '[{"slug": "fast", "backend": "scripted"}, {"slug": "x", "backend": "nope"}]',
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode != 0
    assert "CHAT_MODELS[1] ('x'): backend 'nope'" in result.stderr


@pytest.mark.django_db
def test_each_user_sees_the_models_meant_for_them(two_models: Any, users: Any) -> None:
    alice, bob = users["alice"], users["bob"]
    bob.groups.add(Group.objects.create(name="reviewers"))
    ChatModel.objects.create(slug="row", name="From the admin", backend="scripted", position=1)
    ChatModel.objects.create(slug="off", name="Switched off", backend="scripted", enabled=False)

    assert [spec.slug for spec in models_for(alice)] == ["quick", "careful", "row"]
    assert [spec.slug for spec in models_for(bob)] == ["quick", "careful", "internal", "row"]
    assert model_for(alice).slug == "quick", "the first one is the default"
    assert model_for(alice, "row").declared is False
    for slug in ("internal", "off", "nope"):
        with pytest.raises(ModelUnavailable):
            model_for(alice, slug)


@pytest.mark.django_db
def test_a_declared_model_wins_over_a_row_with_its_slug(two_models: Any, alice: Any) -> None:
    ChatModel.objects.create(slug="quick", name="Impostor", backend="scripted")
    assert model_for(alice, "quick").name == "Quick"


def test_a_conversation_s_settings_stay_within_the_model_s_bounds(two_models: Any) -> None:
    quick = two_models["quick"]
    assert reply_settings(quick) == reply_settings(
        quick, system_prompt=None, temperature=None, max_tokens=None
    )
    used = reply_settings(quick, system_prompt="", temperature=1.8, max_tokens=4000)
    assert (used.system_prompt, used.temperature, used.max_tokens) == ("", 1.0, 128)
