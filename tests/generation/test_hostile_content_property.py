"""Random and hostile model output through the whole engine path (issue 23): whatever the engine
writes and however the reply ends, the reply is saved with exactly the text its tab was shown,
and that is the engine's text as a database can store it.

One socket for every example, on a loop of its own (tests/support/loop_thread.py); the stepped
engine writes each example's deltas, then ends, fails, hits the length limit or is stopped.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.db import connections
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from conversations.engines.base import EngineError, FinishReason
from conversations.models import Conversation, Message
from tests.support.loop_thread import LoopThread, socket_on_a_loop
from tests.support.sockets import Socket, finished
from tests.support.stepped import SteppedEngine

pytestmark = [pytest.mark.django_db(transaction=True)]

EXAMPLES = int(os.environ.get("HOSTILE_EXAMPLES", "120"))
# What a hostile or broken engine writes: NUL, both halves of a surrogate pair (alone, in order,
# the wrong way round), markup, escapes, right-to-left marks, emoji, line breaks.
ODD = ["\x00", "\ud83d", "\ude00", "\ud83d\ude00", "<script>", "&amp;", "\\u0000", "\u202e"]
ODD += ["\U0001f600", "\r\n", "\n\n", "```", "$$", "|", "\ufffd", "\x1b[31m", "\u0301"]
deltas = st.lists(
    st.one_of(
        st.sampled_from(ODD), st.text(max_size=8), st.lists(st.sampled_from(ODD)).map("".join)
    ),
    max_size=25,
)
ENDINGS = ["end", "length", "fail", "stop"]


def as_stored(text: str) -> str:
    """The oracle: text as a browser shows it, NUL dropped and each lone surrogate one U+FFFD
    (read as UTF-16, so a pair split across deltas is one character again)."""
    text = text.replace("\x00", "")
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


@dataclass
class Target:
    runner: LoopThread
    socket: Socket
    engine: SteppedEngine
    conversation: Conversation
    sends: Iterator[int]


@pytest.fixture
def target(
    alice: Any, stepped_engine: SteppedEngine, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Target]:
    settings.CHAT_SENDS_PER_MINUTE = 1_000_000
    monkeypatch.setitem(connections["default"].settings_dict, "CONN_MAX_AGE", 600)
    conversation = Conversation.objects.create(owner=alice, title="Hostile")
    with socket_on_a_loop(alice, conversation.pk) as (runner, socket):
        yield Target(runner, socket, stepped_engine, conversation, itertools.count())


@pytest.mark.timeout(300)
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(written=deltas, ending=st.sampled_from(ENDINGS))
def test_every_reply_is_saved_as_shown_whatever_the_engine_writes(
    target: Target, written: list[str], ending: str
) -> None:
    event(ending)
    target.runner.run(check_reply(target, written, ending))


async def check_reply(target: Target, written: list[str], ending: str) -> None:
    socket = target.socket
    await socket.send(action="send", content=f"Say it {next(target.sends)}")
    stream = await target.engine.next_stream()
    for index, text in enumerate(written):
        last = index == len(written) - 1
        stream.emit(text, finish=FinishReason.LENGTH if ending == "length" and last else None)
    if ending == "fail":
        stream.fail(EngineError("The engine broke."))
    elif ending == "stop":
        await socket.send(action="cancel")
    else:
        stream.end(FinishReason.LENGTH if ending == "length" else FinishReason.STOP)
    events = await socket.receive_until(finished)

    shown = assembled(events)
    final = events[-1]["message"]
    row = await database_sync_to_async(Message.objects.get)(pk=final["id"])
    assert final["content"] == shown, "the finish says what the deltas said"
    assert row.content == shown, "what is saved is what the tab was shown"
    expected_status = {"end": "complete", "length": "complete", "fail": "error"}
    if ending in expected_status:
        assert row.status == expected_status[ending]
        assert row.content == as_stored("".join(written)), "every delta is kept"
    else:
        # Stopped: the beginning of that text the tab had been sent when the Stop came.
        assert row.status in ("cancelled", "complete")
        assert as_stored("".join(written)).startswith(row.content)


def assembled(events: list[dict[str, Any]]) -> str:
    """A reply as a JSON client assembles it (docs/websocket-protocol.md)."""
    text = ""
    for item in events:
        if item["type"] == "message.started":
            text = item["message"]["content"]
        elif item["type"] in ("message.snapshot", "message.delta"):
            assert item["offset"] <= len(text), "a delta past the end: text was lost"
            text = text[: item["offset"]] + item["text"]
        elif item["type"] == "error":
            raise AssertionError(item)
    return text
