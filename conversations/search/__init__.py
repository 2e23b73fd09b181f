"""Search over conversations: their titles and the text of their messages.

One search serves the page (`search`: a user's conversations, ranked, each with its best
matching message and a highlighted snippet), the API's ?q= and the admin (`filter_matching`:
a queryset narrowed to the matching conversations, in its own order).

On PostgreSQL it is full-text search (migration 0010: a stored, GIN-indexed vector of each
message's text and an expression index on titles, in the 'simple' configuration). What was typed
is read as web-search syntax ("exact phrase", -without, or), and its last word, still being
typed, as a prefix. A conversation's score is ts_rank of its title (weight A: ten times a
message's) plus the ranks of its matching messages, so more matches rank higher; ties go to the
most recently active. Only the WINDOW (PHRASE_WINDOW for a phrase) most recently written
matching messages are ranked, so a word found in most messages costs no more than a rare one;
below that (nearly every real query), every match is. Replies count once they have settled (see the migration).

On SQLite (the default for a laptop) it is a plain case-insensitive contains query: every word
must appear in the title or in one message; titles that match come first, then the most recently
active, and the snippet is cut in Python around the first match. (SQLite's LIKE folds ASCII
letters only.)
"""

from __future__ import annotations

import re
import secrets
from collections import defaultdict
from dataclasses import dataclass
from functools import reduce
from operator import and_
from typing import Any

from django.db import NotSupportedError, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import (
    BooleanField,
    Exists,
    ExpressionWrapper,
    Lookup,
    OuterRef,
    Q,
    Subquery,
)
from django.db.models.sql.compiler import SQLCompiler
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from conversations.models import Conversation, ConversationQuerySet, Message
from conversations.services import branches
from conversations.types import AnyUser

CONFIG = "simple"  # the configuration the indexes were built with (migration 0010)
# How a text becomes a vector, as migration 0010 indexes it, exactly (or the index is not
# used): < and > are spaces, for the parser would drop anything shaped like an HTML tag and
# all of a <script> element, which people paste and look for.
VECTOR = f"to_tsvector('{CONFIG}'::regconfig, translate({{}}, '<>', '  '))"
WINDOW = 1_000
# A phrase is matched word position by word position in each message: ranking a fifth as many of
# the newest matches keeps "two common words" as fast as one (about 100 ms with the full WINDOW).
PHRASE_WINDOW = 200
PAGE_SIZE = 20
MAX_LENGTH = 200  # characters of a query, as the API's q allows


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
    """`user`'s conversations matching `text`, best first, a page of PAGE_SIZE at a time."""
    text = clean(text)
    if not text or not user.is_authenticated:
        return Results([], False)
    offset = (page - 1) * PAGE_SIZE
    if connections["default"].vendor == "postgresql":
        found = _ranked_on_postgresql(user.pk, text, offset)
    else:
        found = _ranked_by_contains(user, text, offset)
    has_next = len(found) > PAGE_SIZE
    found = found[:PAGE_SIZE]
    conversations = Conversation.objects.in_bulk([pk for pk, _ in found])
    found = [(pk, m) for pk, m in found if pk in conversations]  # not deleted meanwhile
    message_ids = [m for _, m in found if m is not None]
    texts = dict(Message.objects.filter(pk__in=message_ids).values_list("pk", "content"))
    titles, snippets = _highlight(text, [conversations[pk].title for pk, _ in found], texts)
    off_branch = _off_branch([(conversations[pk], m) for pk, m in found])
    hits = [
        Hit(
            conversation=conversations[pk],
            title=titles[i],
            message_id=message_id,
            snippet=snippets.get(message_id, SafeString("")) if message_id else SafeString(""),
            on_branch=message_id not in off_branch,
        )
        for i, (pk, message_id) in enumerate(found)
    ]
    return Results(hits, has_next)


def filter_matching(queryset: ConversationQuerySet, text: str) -> ConversationQuerySet:
    """The conversations of `queryset` whose title or any of whose messages matches `text`,
    each once, in the queryset's own order. Exact, not windowed: the API's pages count and
    its export follows them to the end."""
    text = clean(text)
    if not text:
        return queryset
    if connections[queryset.db].vendor == "postgresql":
        # One IN over a UNION rather than title OR EXISTS: the planner can then join it either
        # way, from a few index matches or from the user's conversations (an OR forced a
        # filter on every row, whose cost estimate alone set off JIT compilation: +300 ms).
        titles = Conversation.objects.filter(title__fulltext=text).order_by().values("pk")
        texts = Message.objects.filter(content__fulltext=text).order_by().values("conversation_id")
        return queryset.filter(pk__in=titles.union(texts))
    words = contains_terms(text)
    in_title = reduce(and_, (Q(title__icontains=w) for w in words))
    messages = Message.objects.filter(conversation=OuterRef("pk"))
    in_messages = Exists(messages.filter(reduce(and_, (Q(content__icontains=w) for w in words))))
    return queryset.filter(in_title | in_messages)


def clean(text: str) -> str:
    # PostgreSQL refuses NUL in text; nobody types it.
    return text.replace("\x00", "").strip()[:MAX_LENGTH]


# --- PostgreSQL ------------------------------------------------------------------------------

_LAST_WORD = re.compile(r"(\w+)$")
_TRAILING_OR = re.compile(r"\sor\s+$", re.IGNORECASE)


def tsquery(text: str) -> tuple[str, list[Any]]:
    """SQL for the tsquery of `text`, and its parameters: websearch_to_tsquery of what was
    typed, with the last word as a prefix unless it is quoted or negated ("-word")."""
    last = _LAST_WORD.search(text)
    before = text[: last.start()] if last else text
    if not last or before.count('"') % 2 or before.endswith("-"):
        if not re.search(r"\w", text):  # only punctuation: nothing to look for
            return "''::tsquery", []
        return "websearch_to_tsquery(%s::regconfig, %s)", [CONFIG, text]
    # \w only: nothing in it is tsquery syntax, and the parser splits it as it did the text.
    prefix, prefix_params = "to_tsquery(%s::regconfig, %s)", [CONFIG, f"'{last.group(1)}':*"]
    either = _TRAILING_OR.search(before)
    head, operator = (before[: either.start()], "||") if either else (before, "&&")
    if not re.search(r"\w", head):
        return prefix, prefix_params
    # websearch_to_tsquery binds AND tighter than OR, and so does tsquery's && and ||.
    sql = f"(websearch_to_tsquery(%s::regconfig, %s) {operator} {prefix})"
    return sql, [CONFIG, head, *prefix_params]


class _FullTextLookup(Lookup):
    """`field__fulltext=text`: PostgreSQL's full-text match of `text` (see tsquery())."""

    lookup_name = "fulltext"
    prepare_rhs = False

    def as_sql(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper) -> Any:
        raise NotSupportedError("Full-text search needs PostgreSQL; see filter_matching().")

    def as_postgresql(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper) -> Any:
        vector, params = self.vector(compiler, connection)
        query, query_params = tsquery(str(self.rhs))
        return f"{vector} @@ {query}", [*params, *query_params]

    def vector(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper) -> Any:
        raise NotImplementedError


class TitleMatches(_FullTextLookup):
    def vector(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper) -> Any:
        title, params = self.process_lhs(compiler, connection)
        return VECTOR.format(title), params


class MessageTextMatches(_FullTextLookup):
    # The message's stored vector (migration 0010), a column Django does not know: it is
    # read beside `content`, on the same table alias, which a subquery renames.
    def vector(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper) -> Any:
        alias = compiler.quote_name_unless_alias(self.lhs.alias)
        return f"{alias}.search_vector", []


Conversation._meta.get_field("title").register_lookup(TitleMatches)
Message._meta.get_field("content").register_lookup(MessageTextMatches)

# The WINDOW most recently written matching messages of the user, ranked, and their
# conversations' scores with the titles' (ts_rank's weights: A is 1.0, messages' D 0.1).
# {order} is how the messages are found (see recent_first).
_RANKED = """
WITH hits AS MATERIALIZED (
    SELECT m.id, m.conversation_id, c.updated_at, m.search_vector
    FROM conversations_message m
    JOIN conversations_conversation c ON c.id = m.conversation_id
    WHERE c.owner_id = %s AND m.search_vector @@ {q}
    ORDER BY {order} DESC
    LIMIT %s
), in_messages AS (
    SELECT conversation_id, max(updated_at) AS updated_at, sum(rank) AS rank,
        (array_agg(id ORDER BY rank DESC, id DESC))[1] AS best
    FROM (SELECT *, ts_rank(search_vector, {q}) AS rank FROM hits) ranked
    GROUP BY conversation_id
), in_titles AS (
    SELECT id AS conversation_id, updated_at,
        ts_rank(setweight({title_vector}, 'A'), {q}) AS rank
    FROM conversations_conversation
    WHERE owner_id = %s AND {title_vector} @@ {q}
    ORDER BY updated_at DESC
    LIMIT %s
)
SELECT conversation_id, in_messages.best
FROM in_messages FULL JOIN in_titles USING (conversation_id)
ORDER BY coalesce(in_titles.rank, 0) + coalesce(in_messages.rank, 0) DESC,
    coalesce(in_messages.updated_at, in_titles.updated_at) DESC, conversation_id DESC
LIMIT %s OFFSET %s
"""


def ranked_sql(
    owner_id: int, text: str, offset: int, *, recent_first: bool
) -> tuple[str, list[Any]]:
    """The page's query and its parameters (the benchmark EXPLAINs it)."""
    q, q_params = tsquery(text)
    # "m.id + 0" is not the primary key's order, so the planner cannot walk it: it takes the
    # GIN index, then sorts what it found.
    sql = _RANKED.format(
        q=q, title_vector=VECTOR.format("title"), order="m.id" if recent_first else "m.id + 0"
    )
    window = window_for(text)
    params = [
        owner_id, *q_params, window,  # hits
        *q_params,  # in_messages
        *q_params, owner_id, *q_params, window,  # in_titles
        PAGE_SIZE + 1, offset,
    ]  # fmt: skip
    return sql, params


def window_for(text: str) -> int:
    """How many of the newest matching messages are ranked: fewer for a phrase."""
    return PHRASE_WINDOW if text.count('"') >= 2 else WINDOW


def _ranked_on_postgresql(owner_id: int, text: str, offset: int) -> list[tuple[Any, int | None]]:
    with connections["default"].cursor() as cursor:
        sql, params = ranked_sql(owner_id, text, offset, recent_first=recent_first(cursor, text))
        cursor.execute(sql, params)
        return [(pk, best) for pk, best in cursor.fetchall()]


# Reading a message's vector to match it costs about 2 µs; the index, about 6 µs a match
# (the row it points to is fetched). Walking the newest messages costs WINDOW / share of
# messages that match x 2 µs, the index matches x 6 µs: the walk wins once more than
# sqrt(WINDOW x messages / 3) match (8,000 of 200,000 at a WINDOW of 1,000).
_RECENT_FIRST_FACTOR = 1 / 3


def recent_first(cursor: Any, text: str) -> bool:
    """Whether to find the WINDOW newest matches by walking the messages newest first (a
    common word: it soon has enough) rather than through the GIN index (a rarer one).

    The planner would choose by itself, but it prices the match of a row at a fraction of
    its cost, and walked the messages for words in 2-5% of them: 100-140 ms where the index
    took 30-40. Its estimate of how many rows match is good, and decides here."""
    q, q_params = tsquery(text)
    cursor.execute(
        f"EXPLAIN (FORMAT JSON) SELECT 1 FROM conversations_message WHERE search_vector @@ {q}",
        q_params,
    )
    matching = cursor.fetchone()[0][0]["Plan"]["Plan Rows"]
    cursor.execute("SELECT reltuples FROM pg_class WHERE oid = 'conversations_message'::regclass")
    messages = max(cursor.fetchone()[0], 1)
    return bool(matching * matching > _RECENT_FIRST_FACTOR * window_for(text) * messages)


def _headlines(text: str, titles: list[str], messages: list[str]) -> list[SafeString]:
    """ts_headline of each title (all of it) and message (its best passage), escaped, with the
    matches in <mark>. For the page shown only: it parses each text again."""
    if not titles and not messages:
        return []
    q, q_params = tsquery(text)
    # Markers no text will hold: ts_headline puts them around matches, and they become <mark>
    # once the text is escaped.
    start, stop = f"S{secrets.token_hex(8)}", f"E{secrets.token_hex(8)}"
    marks = f"StartSel={start}, StopSel={stop}"
    options = [f"{marks}, HighlightAll=true"] * len(titles)
    options += [f"{marks}, MaxWords=24, MinWords=10"] * len(messages)
    # The text is escaped before ts_headline sees it: given raw text, its parser drops
    # anything shaped like an HTML tag ("<script>") from the snippet.
    sql = f"""
        SELECT ts_headline('{CONFIG}'::regconfig,
            replace(replace(replace(document, '&', '&amp;'), '<', '&lt;'), '>', '&gt;'), {q},
            options)
        FROM unnest(%s::text[], %s::text[]) WITH ORDINALITY AS d(document, options, n)
        ORDER BY n
    """
    with connections["default"].cursor() as cursor:
        cursor.execute(sql, [*q_params, [*titles, *messages], options])
        rows = [row[0] for row in cursor.fetchall()]
    # Escaped already; < and > again all the same, so that only the <mark>s are markup.
    return [
        mark_safe(  # escaped text and our own <mark>s
            row.replace("<", "&lt;").replace(">", "&gt;")
            .replace(start, "<mark>").replace(stop, "</mark>")
        )
        for row in rows
    ]  # fmt: skip


# --- SQLite and others -----------------------------------------------------------------------


def contains_terms(text: str) -> list[str]:
    """The words of `text` for a contains query: split at spaces, quotes and a leading - dropped."""
    words = [w.strip('"').lstrip("-") for w in text.split()]
    return [w for w in words if w] or [text]


def _ranked_by_contains(user: AnyUser, text: str, offset: int) -> list[tuple[Any, int | None]]:
    words = contains_terms(text)
    in_title = reduce(and_, (Q(title__icontains=w) for w in words))
    messages = Message.objects.filter(
        reduce(and_, (Q(content__icontains=w) for w in words)), conversation=OuterRef("pk")
    ).order_by("-id")
    found = (
        Conversation.objects.visible_to(user)
        .annotate(
            title_matches=ExpressionWrapper(in_title, output_field=BooleanField()),
            best=Subquery(messages.values("pk")[:1]),
        )
        .filter(Q(title_matches=True) | Q(best__isnull=False))
        .order_by("-title_matches", "-updated_at", "-pk")
        .values_list("pk", "best")
    )
    return list(found[offset : offset + PAGE_SIZE + 1])


def _marked(text: str, words: list[str], *, around: int | None) -> SafeString:
    """`text` escaped with `words` in <mark>; with `around`, only that many characters near
    the first match."""
    pattern = re.compile("|".join(re.escape(w) for w in sorted(words, key=len, reverse=True)), re.I)
    first = pattern.search(text)
    if around is not None:
        begin = max(0, (first.start() if first else 0) - around // 3)
        if begin:
            begin = text.find(" ", begin) + 1 or begin  # start at a word
        end = min(len(text), begin + around)
        text = ("…" if begin else "") + text[begin:end].strip() + ("…" if end < len(text) else "")
    pieces: list[str] = []
    last = 0
    for match in pattern.finditer(text):
        pieces += [escape(text[last : match.start()]), f"<mark>{escape(match.group())}</mark>"]
        last = match.end()
    pieces.append(escape(text[last:]))
    return mark_safe("".join(pieces))  # every piece escaped above


# --- Both ------------------------------------------------------------------------------------


def _highlight(
    text: str, titles: list[str], messages: dict[int, str]
) -> tuple[list[SafeString], dict[int, SafeString]]:
    if connections["default"].vendor == "postgresql":
        marked = _headlines(text, titles, list(messages.values()))
        return marked[: len(titles)], dict(zip(messages, marked[len(titles) :], strict=True))
    words = contains_terms(text)
    return (
        [_marked(t, words, around=None) for t in titles],
        {pk: _marked(content, words, around=160) for pk, content in messages.items()},
    )


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
