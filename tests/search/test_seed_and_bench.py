"""The made-up history for measuring search, and the measurement itself, at a tiny size: the
figures belong to bench/search.py's runs, not to tests."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from conversations import search
from conversations.models import Conversation, Message
from tests.pages.test_browser import server_database
from tests.support.servers import ROOT


@pytest.mark.django_db
def test_it_seeds_a_searchable_history_and_replaces_it() -> None:
    call_command("seed_search_data", user="seeded", conversations=6, messages=40, seed=3)
    call_command("seed_search_data", user="seeded", conversations=6, messages=40, seed=3)

    user = get_user_model().objects.get(username="seeded")
    assert not user.has_usable_password()
    conversations = Conversation.objects.filter(owner=user)
    assert conversations.count() == 6
    per_conversation = Counter(
        Message.objects.filter(conversation__owner=user).values_list("conversation", flat=True)
    )
    assert sorted(per_conversation.values()) == [6, 6, 7, 7, 7, 7]
    first = Message.objects.filter(conversation=conversations[0]).order_by("id")
    assert [m.role for m in first[:3]] == ["user", "assistant", "user"]
    assert search.search(user, "the").hits  # the most frequent word is in most messages


@pytest.mark.django_db
def test_it_refuses_an_empty_history() -> None:
    with pytest.raises(CommandError, match="at least 1"):
        call_command("seed_search_data", user="seeded", conversations=0, messages=10)


def test_the_benchmark_measures_every_term(tmp_path: Path, db: Any) -> None:
    out = tmp_path / "search.json"
    with server_database(tmp_path) as database_url:
        run = subprocess.run(
            [sys.executable, "-m", "bench.search", "--database-url", database_url,
             "--conversations", "20", "--messages", "200", "--repeat", "2", "--json", str(out),
             "--other-messages", "40"],
            cwd=ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(out.read_text())
    assert (report["conversations"], report["messages"]) == (20, 200)
    assert report["other_user_messages"] == 40  # a second user's, searched past
    assert [t["term"] for t in report["terms"]][-1] == "zzyzx"
    for term in report["terms"]:
        page = term["page_ms"]
        assert page["n"] == 2 and page["min"] <= page["p50"] <= page["p95"] <= page["max"]
    assert report["terms"][-1]["matching_conversations"] == 0
    assert "page search" in run.stdout
