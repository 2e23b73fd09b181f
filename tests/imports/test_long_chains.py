"""A long chain of nodes chatsite does not keep (ChatGPT's `mapping`, Open WebUI's `history`):
the kept message after it follows its nearest kept ancestor, found in work linear in the chain,
however long the chain a file makes up."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from conversations.imports import chatgpt, openwebui, source
from conversations.models import Conversation
from tests.imports.helpers import imported, left_out, shown
from tests.imports.sources import as_json, chatgpt_conversation, chatgpt_node, openwebui_chat

pytestmark = pytest.mark.django_db

LONG_CHAIN = 100_000
QUESTION = "Is anyone there?"


def chatgpt_chain(length: int) -> dict[str, Any]:
    """A root, `length` nodes without a message one under the other, then a question."""
    nodes = [chatgpt_node("root", None, None)]
    for i in range(length):
        nodes.append(chatgpt_node(f"n{i}", nodes[-1]["id"], None))
    nodes.append(chatgpt_node("q", nodes[-1]["id"], "user", QUESTION, 1))
    return chatgpt_conversation("c0ffee00-0000-4000-8000-00000000c4a1", "Chain", nodes, "q")


def openwebui_chain(length: int) -> dict[str, Any]:
    """`length` replies with no text one under the other, then a question."""
    chat = openwebui_chat("0be11e00-0000-4000-8000-00000000c4a1")
    chat["title"] = "Chain"
    history: dict[str, Any] = {
        f"n{i}": {
            "id": f"n{i}",
            "parentId": f"n{i - 1}" if i else None,
            "role": "assistant",
            "content": "",
        }
        for i in range(length)
    }
    history["q"] = {"id": "q", "parentId": f"n{length - 1}", "role": "user", "content": QUESTION}
    chat["chat"]["history"] = {"messages": history, "currentId": "q"}
    return chat


SHAPES: dict[str, tuple[Callable[[int], dict[str, Any]], Any]] = {
    "chatgpt": (chatgpt_chain, chatgpt),
    "openwebui": (openwebui_chain, openwebui),
}


@pytest.mark.timeout(30)  # a backstop: linear work takes a few seconds, a quadratic walk minutes
@pytest.mark.parametrize("shape", SHAPES)
def test_finding_1_a_long_chain_of_nodes_not_kept_imports_in_seconds(
    alice: Any, shape: str
) -> None:
    build, _ = SHAPES[shape]

    report = imported(alice, as_json([build(LONG_CHAIN)]))

    conversation = Conversation.objects.get(pk=report.imported[0].id)
    assert shown(conversation) == [("user", QUESTION)]
    assert conversation.messages.get().parent is None, "nothing kept above it"
    if shape == "openwebui":  # ChatGPT's nodes without a message lose nothing
        assert left_out(report, "Chain") == {source.LEFT_OUT_EMPTY: LONG_CHAIN}


class CountedKey(str):
    """A node's key that counts how often it is compared with another (as a list's `in` does
    with every item, and a dict or a set only with the one its hash finds)."""

    comparisons = 0
    __hash__ = str.__hash__

    def __eq__(self, other: object) -> bool:
        CountedKey.comparisons += 1
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other


@pytest.mark.parametrize("shape", SHAPES)
def test_finding_1_the_walk_up_a_chain_compares_each_node_a_bounded_number_of_times(
    alice: Any, monkeypatch: pytest.MonkeyPatch, shape: str
) -> None:
    length = 2_000
    build, module = SHAPES[shape]
    # The format's ids become keys that count their comparisons; the import is the real one.
    monkeypatch.setattr(
        module, "key_of", lambda value, what: CountedKey(source.key_of(value, what))
    )
    monkeypatch.setattr(CountedKey, "comparisons", 0)

    report = imported(alice, as_json([build(length)]))

    assert report.imported[0].messages == 1
    assert CountedKey.comparisons <= 10 * length, (
        f"{CountedKey.comparisons:,} comparisons of keys for a chain of {length:,} nodes"
    )
