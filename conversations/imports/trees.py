"""A source's message tree, with the nodes chatsite does not keep taken out.

Sources keep every node in their tree (ChatGPT's root, system prompt and tool calls; Open WebUI's
system messages), so a kept message's parent may be a node that is not imported. It then follows
its nearest kept ancestor: a reply after a tool call follows the question that asked for it.
Every walk is iterative and stops at a loop, which a hostile file could contain.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from datetime import UTC, datetime

from conversations.imports.source import ConversationRefused, SourceMessage

LOOP = "Its messages' parents form a loop."
EARLIEST = datetime.min.replace(tzinfo=UTC)


class _Anchors:
    """The nearest kept node at or above a node, remembered for every node walked through, so
    all the walks of a tree together visit each node once: work linear in the source."""

    def __init__(self, parents: Mapping[str, str | None], kept: set[str]):
        self.parents = parents
        self.kept = kept
        self.found: dict[str, str | None] = {}

    def of(self, start: str | None) -> str | None:
        # A set, not a list, for the loop check: a file's chain of 100,000 nodes not kept is
        # one walk, and a list's `in` would make it quadratic (hours of a core for 64 MB).
        chain: set[str] = set()
        node = start
        while True:
            if node is None or node not in self.parents:
                anchor = None  # the top, or a parent the source does not have
                break
            if node in self.found:
                anchor = self.found[node]
                break
            if node in self.kept:
                anchor = node
                break
            if node in chain:
                raise ConversationRefused(LOOP)
            chain.add(node)
            node = self.parents[node]
        self.found.update(dict.fromkeys(chain, anchor))
        return anchor


def arrange(
    messages: list[SourceMessage],
    parents: Mapping[str, str | None],
    current: str | None,
    *,
    fallback_time: datetime | None,
) -> tuple[list[SourceMessage], str | None]:
    """The kept `messages`, parents first and each turn's versions oldest first, each one's
    parent_key now a kept message (or None); and the kept message the branch shown ends at.

    `parents` maps every node of the source, kept or not, to its parent. A message without a
    time takes its parent's (or `fallback_time`). `current` is the source's shown node; when it
    leads to nothing kept, the newest branch is shown.
    """
    positions = {m.key: i for i, m in enumerate(messages)}
    if len(positions) != len(messages):
        raise ConversationRefused("Two of its messages have the same id.")
    anchors = _Anchors(parents, set(positions))
    children: dict[str | None, list[SourceMessage]] = defaultdict(list)
    for message in messages:
        message.parent_key = anchors.of(message.parent_key)
        children[message.parent_key].append(message)

    def oldest_first(siblings: list[SourceMessage]) -> list[SourceMessage]:
        # Untimed messages keep their place in the source, after the timed ones.
        return sorted(
            siblings,
            key=lambda m: (m.created_at is None, m.created_at or EARLIEST, positions[m.key]),
        )

    # Down from the first messages, a level at a time: parents always come before their
    # children, and a loop among kept messages is never reached from the top.
    ordered: list[SourceMessage] = []
    level = oldest_first(children.get(None, []))
    for first in level:
        first.created_at = first.created_at or fallback_time
    while level:
        ordered.extend(level)
        following: list[SourceMessage] = []
        for parent in level:
            for child in oldest_first(children.get(parent.key, [])):
                child.created_at = child.created_at or parent.created_at
                following.append(child)
        level = following
    if len(ordered) != len(messages):
        raise ConversationRefused(LOOP)

    shown = anchors.of(current)
    if shown is None and ordered:
        # From the newest first message down, always to the newest version of the next turn.
        node = oldest_first(children[None])[-1]
        while children.get(node.key):
            node = oldest_first(children[node.key])[-1]
        shown = node.key
    return ordered, shown
