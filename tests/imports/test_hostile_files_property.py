"""Random and hostile exports through POST /api/imports/ (issue 23): a well-formed export of each
format with any of its values replaced by anything JSON can hold (or Python's JSON reader
accepts: NaN, huge numbers), or by a time past the ends of the calendar. No request answers
500: each is imported or refused with a reason, and what was imported opens, lists and exports
as every other conversation does."""

from __future__ import annotations

import copy
import io
import json
import os
import zipfile
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from conversations.models import Conversation
from conversations.services.text import storable
from tests.imports.helpers import api_client, upload
from tests.imports.sources import (
    chatgpt_branched,
    chatgpt_zip,
    claude_conversation,
    claude_zip,
    openwebui_chat,
    zipped,
)

pytestmark = pytest.mark.django_db

EXAMPLES = int(os.environ.get("HOSTILE_EXAMPLES", "150"))
REFUSALS = {400, 413, 422}

SAMPLES: dict[str, Callable[[], Any]] = {
    "chatgpt": lambda: [chatgpt_branched()],
    "claude": lambda: [claude_conversation()],
    "openwebui": lambda: [openwebui_chat()],
}
# Each as its app writes it, with conversations.json (or the chats file) whatever it became.
PACKED: dict[str, Callable[[Any], tuple[bytes, str]]] = {
    "chatgpt": lambda doc: (_rezipped(chatgpt_zip(), doc), "export.zip"),
    "claude": lambda doc: (_rezipped(claude_zip(), doc), "export.zip"),
    "openwebui": lambda doc: (json.dumps(doc).encode(), "chats.json"),
}


def _rezipped(export: bytes, conversations: Any) -> bytes:
    with zipfile.ZipFile(io.BytesIO(export)) as archive:
        members: dict[str, Any] = {name: archive.read(name) for name in archive.namelist()}
    members["conversations.json"] = json.dumps(conversations).encode()
    return zipped(members)


ODD_TEXT = ["\x00", "\ud800", "", " ", "<script>alert(1)</script>", "\u202e", "x" * 2000]
TIMES = ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00", "not a time", "2024-02-30"]
NUMBERS = [2**63, -(2**63) - 1, 10**400, -1, 0, 253402300800, 1e308, float("nan"), float("inf")]
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(ODD_TEXT + TIMES)
    | st.sampled_from(NUMBERS),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=5,
)


def places(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path to every value inside `value` (its keys and indexes), itself first."""
    found = [path]
    if isinstance(value, dict):
        for key, inner in value.items():
            found += places(inner, (*path, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += places(inner, (*path, index))
    return found


def replaced(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    holder = document
    for step in path[:-1]:
        holder = holder[step]
    holder[path[-1]] = value
    return document


@pytest.fixture
def alice_api(alice: Any, settings: Any) -> Client:
    settings.CHAT_IMPORTS_PER_HOUR = 1_000_000  # the hourly limit has tests of its own
    return api_client(alice)


@pytest.mark.timeout(300)
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data(), source=st.sampled_from(sorted(SAMPLES)))
def test_no_hostile_export_answers_500_and_what_it_imports_opens(
    alice: Any, alice_api: Client, data: st.DataObject, source: str
) -> None:
    document = copy.deepcopy(SAMPLES[source]())
    for _ in range(data.draw(st.integers(1, 3), label="changes")):
        path = data.draw(st.sampled_from(places(document)), label="path")
        document = replaced(document, path, data.draw(json_values, label="value"))
    content, name = PACKED[source](document)
    keep_partial = data.draw(st.booleans(), label="keep_partial")
    before = set(Conversation.objects.filter(owner=alice).values_list("pk", flat=True))

    response = alice_api.post(
        "/api/imports/", {"file": upload(content, name), "keep_partial": keep_partial}
    )
    event(f"{source}: {response.status_code}")
    assert response.status_code == 201 or response.status_code in REFUSALS, response.content
    assert response["Content-Type"].startswith("application/json")
    if response.status_code != 201:
        assert response.json()  # a reason, in JSON
        assert set(Conversation.objects.filter(owner=alice).values_list("pk", flat=True)) == before
        return
    for conversation in Conversation.objects.filter(owner=alice).exclude(pk__in=before):
        assert storable(conversation.title)
        for text in conversation.messages.values_list("content", flat=True):
            assert storable(text)
        for url in (
            conversation.get_absolute_url(),
            f"/api/conversations/{conversation.pk}/",
            f"/api/conversations/{conversation.pk}/export?format=json",
        ):
            page = alice_api.get(url) if url.startswith("/api/") else _browser(alice).get(url)
            assert page.status_code == 200, (url, page.content[:300])
    assert alice_api.get("/api/conversations/").status_code == 200
    assert _browser(alice).get("/").status_code == 200


def _browser(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client
