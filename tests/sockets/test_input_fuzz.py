"""Thousands of random frames at one socket: each is answered, none crashes the consumer, and
only the valid sends among them change the database.

Whether a frame is a valid send is decided here from the protocol's rules, independently of
conversations.sockets.frames, so the two can disagree and fail the test.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
from channels.db import database_sync_to_async
from django.db import connections
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from conversations.models import Conversation, Message
from tests.support.loop_thread import LoopThread, socket_on_a_loop
from tests.support.sockets import Socket

pytestmark = [pytest.mark.django_db(transaction=True)]

T = TypeVar("T")

# Frames per run: 40 to 60 s on two shared cores. FUZZ_EXAMPLES=20000 for a long hunt.
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "1500"))
PROMPT_LIMIT = 40
FRAME_LIMIT = 64 * 1024
KEY_LIMIT = 64
# Few distinct keys, so that sends often repeat one and must be refused as duplicates.
KEYS = ("k1", "k2", "k3")
ODD_TEXT = ("\x00", "\ud800", "\udfff", " ", "\n\t", "\u2003", "\U0001f600", "<b>", '"', "\\")

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
texts = st.one_of(
    st.text(st.characters(codec="ascii"), min_size=1, max_size=PROMPT_LIMIT),
    st.text(max_size=PROMPT_LIMIT + 5),
    st.lists(st.sampled_from(ODD_TEXT) | st.characters(), max_size=8).map("".join),
    st.integers(PROMPT_LIMIT - 2, PROMPT_LIMIT + 2).map(lambda n: " " + "x" * n + " "),
)


def frame_objects(conversation_id: str) -> st.SearchStrategy[dict[str, Any]]:
    keys = st.sampled_from([*KEYS, "", None, "k" * (KEY_LIMIT + 1)]) | st.text(max_size=4)
    conversations = st.sampled_from(
        [conversation_id, conversation_id, conversation_id.upper()]
    ) | st.uuids().map(str)
    # Sends of a well-formed shape, so that a good share of the frames start replies or repeat
    # a key; only a quarter of the objects, because each started reply costs most of the time.
    sends = st.fixed_dictionaries(
        {"action": st.just("send"), "content": texts},
        optional={"idempotency_key": keys, "conversation": conversations, "HEADERS": json_values},
    )
    anything = [
        st.fixed_dictionaries(
            {},
            optional={
                "action": st.sampled_from(["send", "cancel", "Send", "", "stop"]) | json_values,
                "content": texts | json_values,
                "idempotency_key": keys | json_values,
                "conversation": conversations | json_values,
                "HEADERS": json_values,
            },
        )
        for _ in range(3)  # equal strategies: one_of would merge one given twice
    ]
    extra = st.dictionaries(st.text(max_size=8), json_values, max_size=2)
    return st.tuples(extra, st.one_of(sends, *anything)).map(lambda parts: {**parts[0], **parts[1]})


def dumps(value: Any, ascii_only: bool) -> str:
    raw = json.dumps(value, ensure_ascii=ascii_only)
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:  # a websocket text frame cannot carry a lone surrogate
        raw = json.dumps(value)
    return raw


def frames(conversation_id: str) -> st.SearchStrategy[str | bytes]:
    # Most frames are JSON objects, the shape a client means to send; the rest anything at all.
    # Several equal strategies weigh objects more: one_of would merge one strategy given twice.
    objects = [st.builds(dumps, frame_objects(conversation_id), st.booleans()) for _ in range(3)]
    return st.one_of(
        *objects,
        st.text(max_size=60),
        st.binary(max_size=40),
        st.builds(dumps, json_values, st.booleans()),
    )


def expected_send(raw: str | bytes, conversation_id: str) -> tuple[str, str] | None:
    """(content, key) if the protocol says this frame is a send to start, else None."""
    if isinstance(raw, bytes) or len(raw.encode("utf-8", "surrogatepass")) > FRAME_LIMIT:
        return None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("action") != "send":
        return None
    if data.get("conversation") not in (None, conversation_id, conversation_id.upper()):
        return None
    content, key = data.get("content"), data.get("idempotency_key")
    key = "" if key is None else key
    if not (isinstance(content, str) and isinstance(key, str)):
        return None
    if not (storable(content) and storable(key)) or len(key) > KEY_LIMIT:
        return None
    content = content.strip()
    if not content or len(content) > PROMPT_LIMIT:
        return None
    # No model, null or blank: the conversation's. Anything else names a model, and the random
    # values an extra "model" key gets name none that is available: the send is refused.
    model = data.get("model")
    if model is not None and not (isinstance(model, str) and not model.strip()):
        return None
    return content, key


def storable(value: str) -> bool:
    """No NUL (PostgreSQL refuses it) and no lone surrogate (UTF-8 cannot encode it)."""
    return "\x00" not in value and not any(0xD800 <= ord(char) <= 0xDFFF for char in value)


@dataclass(frozen=True)
class DbState:
    """Every column of every row a frame can touch."""

    messages: list[tuple[Any, ...]]
    conversations: list[tuple[Any, ...]]

    @property
    def used_keys(self) -> set[str]:
        column = [f.name for f in Message._meta.concrete_fields].index("idempotency_key")
        return {row[column] for row in self.messages} - {""}


@database_sync_to_async
def db_state() -> DbState:
    return DbState(
        messages=list(Message.objects.order_by("pk").values_list()),
        conversations=list(Conversation.objects.order_by("pk").values_list()),
    )


@dataclass(repr=False)
class Target:
    runner: LoopThread
    socket: Socket
    # Nothing runs between two frames (each reply has finished before its check returns), so
    # the state after one frame is the state before the next; reading it once saves half the
    # queries of a run.
    state: DbState

    def __repr__(self) -> str:  # Hypothesis prints it with a failing example
        return f"<socket, {len(self.state.messages)} messages saved>"


@pytest.fixture
def target(
    alice: Any, conversation: Conversation, scripted_engine: Any, limits: None
) -> Iterator[Target]:
    """One socket for every example: the point is that it survives all of them."""
    scripted_engine.tokens = 2
    scripted_engine.delay_s = 0

    with socket_on_a_loop(alice, conversation.pk) as (runner, socket):
        yield Target(runner, socket, runner.run(db_state()))


@pytest.fixture
def limits(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.CHAT_MAX_PROMPT_CHARS = PROMPT_LIMIT
    # Every valid send should start a reply; the limits have their own tests.
    settings.CHAT_SENDS_PER_MINUTE = 1_000_000
    # Keep connections open between queries (DATABASE_CONN_MAX_AGE): on PostgreSQL a new
    # connection for every query took half the run. The fixture closes them at the end.
    monkeypatch.setitem(connections["default"].settings_dict, "CONN_MAX_AGE", 600)


CONVERSATION_ID = "00000000-0000-4000-8000-000000000001"


@pytest.fixture
def conversation(alice: Any) -> Conversation:
    # A fixed id, so the frame strategy, built at import time, can name this conversation.
    return Conversation.objects.create(pk=CONVERSATION_ID, owner=alice, title="Fuzzed")


@database_sync_to_async
def messages_after(count: int) -> list[Message]:
    return list(Message.objects.order_by("pk")[count:])


def answered(received: dict[str, Any]) -> bool:
    return received["type"] in ("error", "message.finished")


@pytest.mark.timeout(300)  # the suite's 120 s limit is too tight on a loaded machine
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(raw=frames(CONVERSATION_ID))
def test_it_survives_random_frames_and_only_valid_sends_change_rows(
    target: Target, raw: str | bytes
) -> None:
    # Hypothesis counts the outcomes (how many frames started a reply) in its statistics.
    event(target.runner.run(check_frame(target, raw)))


async def check_frame(target: Target, raw: str | bytes) -> str:
    """Send one frame; check its answer, and the database, against the protocol's rules."""
    socket, before = target.socket, target.state

    # send_input rather than send_to, which refuses empty frames that a real client can send.
    kind = "bytes" if isinstance(raw, bytes) else "text"
    await socket.communicator.send_input({"type": "websocket.receive", kind: raw})
    events = await socket.receive_until(answered, timeout=10)
    assert await socket.communicator.receive_nothing(timeout=0), "one answer per frame"
    after = target.state = await db_state()

    send = expected_send(raw, CONVERSATION_ID)
    duplicate = send is not None and send[1] in before.used_keys  # "" is no key, never used
    if send is None or duplicate:
        assert [e["type"] for e in events] == ["error"], f"refused: {raw!r}"
        assert events[0]["message"]
        if duplicate:
            assert events[0]["code"] == "duplicate"
        assert after == before, f"a refused frame changed the database: {raw!r}"
        return f"refused: {events[0]['code']}"

    content, key = send
    assert events[0]["type"] == "message.started", f"a valid send was refused: {raw!r} -> {events}"
    assert events[-1]["message"]["status"] == "complete"
    old_messages, new_messages = before.messages, after.messages
    assert new_messages[: len(old_messages)] == old_messages, "a send rewrote older messages"
    added = await messages_after(len(old_messages))
    assert [(m.role, m.content, m.idempotency_key) for m in added[:1]] == [("user", content, key)]
    assert [(m.role, m.status) for m in added[1:]] == [("assistant", "complete")]
    return "started a reply"
