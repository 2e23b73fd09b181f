"""Search over conversations: their titles and the text of their messages.

One search serves the page (`search`: a user's conversations, ranked, each with its best
matching message and a highlighted snippet), the API's ?q= and the admin (`filter_matching`:
a queryset narrowed to the matching conversations, in its own order).

On PostgreSQL it is full-text search (migrations 0010 and 0012: a stored vector of each
message's text, of its first INDEXED_CHARS characters, and one of titles, GIN-indexed by owner,
in the 'simple' configuration: a user's search reads only that user's messages). What was typed
is read as web-search syntax ("exact phrase", -without, or), and its last word, still being
typed, as a prefix. A conversation's score is ts_rank of its title (weight A: ten times a
message's) plus the ranks of its matching messages, so more matches rank higher; ties go to the
most recently active. Only the WINDOW (PHRASE_WINDOW for a phrase) most recently written
matching messages are ranked, so a word found in most messages costs no more than a rare one;
below that (nearly every real query), every match is. Replies count once they have settled
(see migration 0010).

Filters typed among the words (`project:`, `pinned:`, `archived:`, `model:`, `before:`, `after:`;
see filters.py) narrow either search to the conversations that hold them; filters alone list
those conversations, most recently active first. A filter whose value means nothing raises
FilterError.

On SQLite (the default for a laptop) it is a plain case-insensitive contains query: every word
must appear in the title or in one message; titles that match come first, then the most recently
active, and the snippet is cut in Python around the first match. (SQLite's LIKE folds ASCII
letters only.)

- query: what was typed, cleaned and read as a tsquery or as words to contain;
- filters: the filters in what was typed, read apart from its free text;
- postgresql: the `fulltext` lookups and the ranked query;
- contains: the contains query of SQLite and other databases;
- snippets: titles and snippets with the matches in <mark>, cut from plain text (plain).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.db import connections
from django.db.models import F
from django.db.models.functions import Left
from django.utils.safestring import SafeString

from conversations.models import Conversation, ConversationQuerySet, Message
from conversations.search import contains, postgresql, snippets
from conversations.search.filters import FilterError, Filters, parse
from conversations.search.postgresql import ranked_sql, recent_first
from conversations.search.query import INDEXED_CHARS, MAX_LENGTH, PAGE_SIZE, clean
from conversations.services import branches
from conversations.types import AnyUser

# What the page, the API, the admin and the bench use; the rest is read in its own module.
__all__ = [
    "MAX_LENGTH",
    "PAGE_SIZE",
    "FilterError",
    "Hit",
    "Results",
    "clean",
    "filter_matching",
    "ranked_sql",
    "recent_first",
    "search",
]


@dataclass(frozen=True)
class Hit:
    conversation: Conversation
    title: SafeString  # escaped, the matching words in <mark>
    message_id: int | None  # the best matching message; None when only the title matched
    snippet: SafeString  # escaped text around the match in that message, with <mark>
    on_branch: bool  # the message is on the branch the page shows


@dataclass(frozen=True)
class Results:
    hits: list[Hit]
    has_next: bool


def search(user: AnyUser, text: str, *, page: int = 1) -> Results:
    """`user`'s conversations matching `text`, best first, a page of PAGE_SIZE at a time.
    FilterError when a filter in it means nothing."""
    query = parse(clean(text))
    text = query.text
    if not (text or query.filters) or not user.is_authenticated:
        return Results([], False)
    offset = (page - 1) * PAGE_SIZE
    full_text = connections["default"].vendor == "postgresql"
    if not text:
        found = _filtered_only(user, query.filters, offset)
    elif full_text:
        found = postgresql.ranked(user.pk, text, offset, query.filters)
    else:
        found = contains.ranked(user, text, offset, query.filters)
    has_next = len(found) > PAGE_SIZE
    found = found[:PAGE_SIZE]
    conversations = Conversation.objects.in_bulk([pk for pk, _ in found])
    found = [(pk, m) for pk, m in found if pk in conversations]  # not deleted meanwhile
    message_ids = [m for _, m in found if m is not None]
    # Full-text search found the match in the indexed prefix: the snippet is cut from it.
    content = Left("content", INDEXED_CHARS) if full_text else F("content")
    texts = dict(Message.objects.filter(pk__in=message_ids).values_list("pk", content))
    titles, marked = snippets.highlight(text, [conversations[pk].title for pk, _ in found], texts)
    off_branch = _off_branch([(conversations[pk], m) for pk, m in found])
    hits = [
        Hit(
            conversation=conversations[pk],
            title=titles[i],
            message_id=message_id,
            snippet=marked.get(message_id, SafeString("")) if message_id else SafeString(""),
            on_branch=message_id not in off_branch,
        )
        for i, (pk, message_id) in enumerate(found)
    ]
    return Results(hits, has_next)


def filter_matching(queryset: ConversationQuerySet, text: str) -> ConversationQuerySet:
    """The conversations of `queryset` whose title or any of whose messages matches `text`,
    each once, in the queryset's own order. Exact, not windowed: the API's pages count and
    its export follows them to the end. FilterError when a filter in it means nothing."""
    query = parse(clean(text))
    text = query.text
    if query.filters:
        queryset = queryset.filter(query.filters.q())
    if not text:
        return queryset
    if connections[queryset.db].vendor == "postgresql":
        return postgresql.matching(queryset, text)
    return contains.matching(queryset, text)


def _filtered_only(user: AnyUser, filters: Filters, offset: int) -> list[tuple[Any, int | None]]:
    """Filters and no words: the conversations holding them, as the sidebar lists them."""
    found = (
        Conversation.objects.visible_to(user)
        .filter(filters.q())
        .with_messages_or()
        .newest_first()
        .values_list("pk", flat=True)
    )
    return [(pk, None) for pk in found[offset : offset + PAGE_SIZE + 1]]


def _off_branch(found: list[tuple[Conversation, int | None]]) -> set[int]:
    """Of these best messages, those not on the branch their conversation shows (another
    version of some turn: see services.branches). A plain list (no current leaf) shows all."""
    trees = {c.pk: c.current_leaf_id for c, m in found if m is not None and c.current_leaf_id}
    by_conversation: dict[Any, dict[int, Message]] = defaultdict(dict)
    for message in Message.objects.filter(conversation__in=trees).only(
        "pk", "parent_id", "conversation_id"
    ):
        by_conversation[message.conversation_id][message.pk] = message
    shown = {
        m.pk for pk, leaf in trees.items() for m in branches.path_to(leaf, by_conversation[pk])
    }
    return {m for c, m in found if m is not None and c.pk in trees and m not in shown}
