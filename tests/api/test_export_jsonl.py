"""GET /api/export.jsonl: bounded pages of JSON lines, one `Link: rel="next"` after another."""

from __future__ import annotations

import gc
import json
import re
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from channels.db import database_sync_to_async
from django.core import signing
from django.db import connection
from django.db.models.signals import post_init
from django.test import AsyncClient, Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from conversations.api import cursors, exports
from conversations.api.serializers import message_data
from conversations.models import Conversation, Message
from tests.support.db import close_worker_connections
from tests.support.history import in_export_order, make_history

# Each conversation of make_history(..., 3, FILLER) is a line of about 1.6 KB.
FILLER = " lorem ipsum" * 40
PAGE_BYTES = 8 * 1024


def lines(response: Any) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.content
    return [json.loads(line) for line in response.content.decode().splitlines()]


def next_url(response: Any) -> str | None:
    """The next page's URL, from the `Link: <url>; rel="next"` header; None on the last page."""
    if "Link" not in response:
        return None
    match = re.fullmatch(r'<([^>]+)>; rel="next"', response["Link"])
    assert match, response["Link"]
    return match[1]


def pages(client: Client, **params: str) -> list[Any]:
    """Every response of the export, following its Link headers from the first page."""
    responses = [client.get(reverse("api-export-jsonl"), params)]
    while (url := next_url(responses[-1])) is not None:
        responses.append(client.get(url))
    return responses


def ids(responses: list[Any]) -> list[str]:
    return [line["id"] for response in responses for line in lines(response)]


def test_it_exports_every_conversation_as_json_lines(api: Client, history: Conversation) -> None:
    other = Conversation.objects.create(owner=history.owner, title="second")

    response = api.get(reverse("api-export-jsonl"))

    assert not response.streaming
    assert response["Content-Type"] == "application/x-ndjson"
    assert next_url(response) is None
    exported = lines(response)
    assert [line["id"] for line in exported] == [str(history.pk), str(other.pk)]  # oldest first
    assert exported[0]["messages"] == [
        {**message_data(m), "version": [1, 1, None, None], "is_current": True}
        for m in history.messages.all()
    ]
    assert ids([api.get(reverse("api-export-jsonl"), {"q": "second"})]) == [str(other.pk)]


def test_it_pages_a_long_history_through_link_headers(
    api: Client, alice: Any, settings: Any
) -> None:
    settings.CHAT_EXPORT_PAGE_BYTES = PAGE_BYTES
    make_history(alice, 40, 3, FILLER)
    # Alone bigger than a page: it still gets a page of its own.
    huge = Conversation.objects.create(owner=alice, title="huge")
    Message.objects.create(conversation=huge, role="user", content="x" * (3 * PAGE_BYTES))
    make_history(alice, 10, 3, FILLER, title="after")

    responses = pages(api)

    assert len(responses) > 8
    assert ids(responses) == in_export_order(alice)  # each exactly once, in order
    assert all(
        r["Link"].startswith("<http://testserver/api/export.jsonl?cursor=") for r in responses[:-1]
    )
    oversized = [r for r in responses if len(r.content) > PAGE_BYTES]
    assert [line["title"] for r in oversized for line in lines(r)] == ["huge"]


def test_it_keeps_the_filters_from_page_to_page(api: Client, alice: Any, settings: Any) -> None:
    settings.CHAT_EXPORT_PAGE_BYTES = PAGE_BYTES
    kept = make_history(alice, 15, 3, FILLER, title="sourdough")
    make_history(alice, 15, 3, FILLER, title="other")
    old = make_history(alice, 5, 3, FILLER, title="sourdough old")
    Conversation.objects.filter(pk__in=[c.pk for c in old]).update(
        updated_at=timezone.now() - timedelta(days=30)
    )
    since = (timezone.now() - timedelta(days=1)).isoformat()

    responses = pages(api, q="sourdough", since=since)

    assert len(responses) > 2
    for response in responses[:-1]:
        query = parse_qs(urlsplit(next_url(response) or "").query)
        assert query["q"] == ["sourdough"] and query["since"] == [since]
    assert ids(responses) == in_export_order(alice, among=kept)


def test_it_adds_no_duplicates_and_skips_nothing_when_the_history_changes_while_paging(
    api: Client, alice: Any, settings: Any
) -> None:
    settings.CHAT_EXPORT_PAGE_BYTES = PAGE_BYTES
    before = make_history(alice, 30, 3, FILLER)
    first = api.get(reverse("api-export-jsonl"))
    exported = {line["id"] for line in lines(first)}
    done = next(c for c in before if str(c.pk) in exported)
    pending = next(c for c in before if str(c.pk) not in exported)

    # New activity moves updated_at (the old order) of one conversation already exported and one
    # still to come; a new conversation arrives.
    Message.objects.create(conversation=done, role="user", content="back again")
    Message.objects.create(conversation=pending, role="user", content="still here")
    Conversation.objects.filter(pk__in=[done.pk, pending.pk]).update(updated_at=timezone.now())
    created = Conversation.objects.create(owner=alice, title="started while paging")

    url = next_url(first)
    assert url is not None
    rest = [api.get(url)]
    while (url := next_url(rest[-1])) is not None:
        rest.append(api.get(url))

    assert ids([first, *rest]) == in_export_order(alice)
    assert ids(rest)[-1] == str(created.pk)


@pytest.mark.parametrize(
    "cursor",
    [
        "nonsense",
        signing.Signer(salt="another").sign_object(["2025-01-01T00:00:00+00:00", "0" * 32]),
        cursors.SIGNER.sign_object("not a position"),
        cursors.SIGNER.sign_object(["not a time", "0" * 32]),
        cursors.SIGNER.sign_object(["2025-01-01T00:00:00+00:00", "not a key"]),
    ],
)
def test_it_refuses_a_cursor_it_did_not_issue(api: Client, alice: Any, cursor: str) -> None:
    response = api.get(reverse("api-export-jsonl"), {"cursor": cursor})
    assert response.status_code == 400
    assert response.json() == {"cursor": [cursors.INVALID]}


def test_it_refuses_a_tampered_cursor(api: Client, alice: Any, settings: Any) -> None:
    settings.CHAT_EXPORT_PAGE_BYTES = PAGE_BYTES
    make_history(alice, 20, 3, FILLER)
    cursor = parse_qs(urlsplit(next_url(api.get(reverse("api-export-jsonl"))) or "").query)
    token = cursor["cursor"][0]
    forged = ("A" if token[0] != "A" else "B") + token[1:]

    response = api.get(reverse("api-export-jsonl"), {"cursor": forged})

    assert response.status_code == 400 and "cursor" in response.json()


def test_it_pages_through_alice_conversations_only(
    api: Client, charlie_api: Client, alice: Any, charlie: Any, settings: Any
) -> None:
    settings.CHAT_EXPORT_PAGE_BYTES = PAGE_BYTES
    make_history(alice, 20, 3, FILLER, title="alice's")
    make_history(charlie, 20, 3, FILLER, title="charlie's")
    make_history(alice, 20, 3, FILLER, title="alice's later")

    alice_pages = pages(api)
    assert ids(alice_pages) == in_export_order(alice)
    # alice's cursor in charlie's hands: a position in time, still only his conversations.
    url = next_url(alice_pages[0])
    assert url is not None
    for line in lines(charlie_api.get(url)):
        assert line["owner"] == "charlie"


# --- memory and queries --------------------------------------------------------------------------


def peak_memory_of_first_page(api: Client) -> int:
    """Peak bytes Python allocated while the first page was built and sent."""
    tracemalloc.start()
    try:
        response = api.get(reverse("api-export-jsonl"))
        assert response.status_code == 200
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_it_builds_a_page_in_the_same_memory_however_long_the_history(
    api: Client, alice: Any, settings: Any
) -> None:
    settings.CHAT_EXPORT_PAGE_BYTES = 64 * 1024
    # Without the cycle collector, memory is freed only by reference counting: what a batch
    # leaves behind (a reference cycle, a cache) would add up batch after batch.
    gc.collect()
    gc.disable()
    try:
        make_history(alice, 4 * exports.JSONL_CHUNK_SIZE, 10, FILLER)
        peak_small = peak_memory_of_first_page(api)
        make_history(alice, 16 * exports.JSONL_CHUNK_SIZE, 10, FILLER)
        peak_large = peak_memory_of_first_page(api)
    finally:
        gc.enable()

    assert peak_large < 1.3 * peak_small, (peak_small, peak_large)


def test_it_reads_only_the_batches_a_page_needs(api: Client, alice: Any, settings: Any) -> None:
    per_conversation, conversations = 10, 10 * exports.JSONL_CHUNK_SIZE
    make_history(alice, conversations, per_conversation, FILLER)
    line = len(api.get(reverse("api-export-jsonl")).content) / conversations  # all in one page
    # About one and a half batches' worth of conversations.
    settings.CHAT_EXPORT_PAGE_BYTES = int(1.5 * exports.JSONL_CHUNK_SIZE * line)

    with CaptureQueriesContext(connection) as queries:
        response = api.get(reverse("api-export-jsonl"))

    page = lines(response)
    assert exports.JSONL_CHUNK_SIZE < len(page) < 2 * exports.JSONL_CHUNK_SIZE
    assert all(len(c["messages"]) == per_conversation for c in page)
    # One query of messages a batch: two batches read, not the ten of the whole history. (The
    # query of conversations sizes their messages in a subquery, FROM "conversations_message" U0;
    # the messages are read with their ratings, joined.)
    sql = [q["sql"] for q in queries.captured_queries]
    read = 'FROM "conversations_message" LEFT OUTER JOIN "conversations_feedback"'
    assert len([q for q in sql if read in q]) == 2
    assert len([q for q in sql if 'FROM "conversations_conversation"' in q]) == 1


@contextmanager
def message_text_read() -> Iterator[list[int]]:
    """The length of every message loaded from the database meanwhile, as it is loaded."""
    read: list[int] = []

    def loaded(sender: type[Message], instance: Message, **kwargs: Any) -> None:
        read.append(len(instance.content))

    post_init.connect(loaded, sender=Message)
    try:
        yield read
    finally:
        post_init.disconnect(loaded, sender=Message)


def test_finding_10_a_page_reads_about_its_own_bytes_not_a_batch_of_conversations(
    api: Client, alice: Any, settings: Any
) -> None:
    page_bytes = settings.CHAT_EXPORT_PAGE_BYTES = 64 * 1024
    # Each a little over half a page: one a page. The huge one, alone, is three pages.
    make_history(alice, 8, 1, "x" * (page_bytes // 2 + 1024))
    huge = Conversation.objects.create(owner=alice, title="huge")
    Message.objects.create(conversation=huge, role="user", content="y" * (3 * page_bytes))
    make_history(alice, 30, 1, "z" * (page_bytes // 2 + 1024), title="after")

    responses, reads = [], []
    url: str | None = reverse("api-export-jsonl")
    while url is not None:
        with message_text_read() as lengths:
            responses.append(api.get(url))
        reads.append(sum(lengths))
        url = next_url(responses[-1])

    assert ids(responses) == in_export_order(alice)  # each once, in order, resuming after the last
    assert [len(lines(r)) for r in responses] == [1] * 39
    for response, read in zip(responses, reads, strict=True):
        # What a page read of message text is what it wrote, not a batch of conversations.
        assert read <= len(response.content), (read, len(response.content))
        assert len(response.content) <= page_bytes or lines(response)[0]["title"] == "huge"


@pytest.mark.django_db(transaction=True)
async def test_it_answers_the_same_pages_under_asgi(
    token_key: str, alice: Any, settings: Any
) -> None:
    settings.CHAT_EXPORT_PAGE_BYTES = PAGE_BYTES
    await database_sync_to_async(make_history)(alice, 20, 3, FILLER)
    # Headers go with the request: AsyncClient(headers=...) sends them under the wrong names.
    bearer = {"Authorization": f"Bearer {token_key}"}
    try:
        responses = [await AsyncClient().get(reverse("api-export-jsonl"), headers=bearer)]
        while (url := next_url(responses[-1])) is not None:
            responses.append(await AsyncClient().get(url, headers=bearer))
        expected = await database_sync_to_async(in_export_order)(alice)
        wsgi = await database_sync_to_async(Client(headers=bearer).get)(reverse("api-export-jsonl"))
    finally:
        await close_worker_connections()

    assert not any(r.streaming for r in responses)
    assert len(responses) > 2
    assert ids(responses) == expected
    assert (wsgi.content, wsgi["Link"]) == (responses[0].content, responses[0]["Link"])


def test_it_documents_the_cursor_and_the_link_header(alice: Any) -> None:
    reader = Client()
    reader.force_login(alice)
    schema = reader.get(reverse("api-schema"), {"format": "json"}).json()

    export = schema["paths"]["/api/export.jsonl"]["get"]
    assert {p["name"] for p in export["parameters"]} == {"q", "since", "until", "cursor"}
    assert "Link" in export["responses"]["200"]["headers"]
    assert 'rel="next"' in export["description"]
