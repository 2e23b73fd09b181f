"""Full-text search on PostgreSQL: the `fulltext` lookups on titles and message text, and the
ranked query of the search page (see the package's docstring for how it ranks)."""

from __future__ import annotations

from typing import Any

from django.db import NotSupportedError, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Lookup
from django.db.models.sql.compiler import SQLCompiler

from conversations.models import Conversation, ConversationQuerySet, Message
from conversations.search.query import PAGE_SIZE, VECTOR, tsquery

WINDOW = 1_000
# A phrase is matched word position by word position in each message: ranking a fifth as many of
# the newest matches keeps "two common words" as fast as one (about 100 ms with the full WINDOW).
PHRASE_WINDOW = 200


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


# On import: the package imports this module, so the lookups exist wherever search is used.
Conversation._meta.get_field("title").register_lookup(TitleMatches)
Message._meta.get_field("content").register_lookup(MessageTextMatches)


def matching(queryset: ConversationQuerySet, text: str) -> ConversationQuerySet:
    """filter_matching on PostgreSQL: the conversations whose title or a message matches."""
    # One IN over a UNION rather than title OR EXISTS: the planner can then join it either
    # way, from a few index matches or from the user's conversations (an OR forced a
    # filter on every row, whose cost estimate alone set off JIT compilation: +300 ms).
    titles = Conversation.objects.filter(title__fulltext=text).order_by().values("pk")
    texts = Message.objects.filter(content__fulltext=text).order_by().values("conversation_id")
    return queryset.filter(pk__in=titles.union(texts))


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


def ranked(owner_id: int, text: str, offset: int) -> list[tuple[Any, int | None]]:
    """A page (and one more, to tell if there is a next) of the owner's matching conversations,
    best first: each conversation's id and its best matching message's (None: only its title)."""
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
