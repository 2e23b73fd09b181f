"""Full-text search on PostgreSQL: the `fulltext` lookups on titles and message text, the lookup
of messages by the owner each holds, and the ranked query of the search page (see the package's
docstring for how it ranks)."""

from __future__ import annotations

from typing import Any

from django.db import NotSupportedError, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Lookup
from django.db.models.sql.compiler import SQLCompiler

from conversations.models import Conversation, ConversationQuerySet, Message
from conversations.search.filters import Filters
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


class OwnedByOneOf(Lookup):
    """`conversation__search_owner_in=owner_ids`: the messages of these owners, read from the
    owner each message holds (migration 0012), which the message indexes start with."""

    lookup_name = "search_owner_in"
    prepare_rhs = False

    def as_sql(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper) -> Any:
        raise NotSupportedError("Only PostgreSQL keeps a message's owner; see filter_matching().")

    def as_postgresql(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper) -> Any:
        # As MessageTextMatches: a column Django does not know, on the message's table alias.
        alias = compiler.quote_name_unless_alias(self.lhs.alias)
        owners, params = self.process_rhs(compiler, connection)
        return f"{alias}.search_owner_id IN {owners}", params


# On import: the package imports this module, so the lookups exist wherever search is used.
Conversation._meta.get_field("title").register_lookup(TitleMatches)
Message._meta.get_field("content").register_lookup(MessageTextMatches)
Message._meta.get_field("conversation").register_lookup(OwnedByOneOf)


def matching(queryset: ConversationQuerySet, text: str) -> ConversationQuerySet:
    """filter_matching on PostgreSQL: the conversations whose title or a message matches."""
    # One IN over a UNION rather than title OR EXISTS: the planner can then join it either
    # way, from a few index matches or from the user's conversations (an OR forced a
    # filter on every row, whose cost estimate alone set off JIT compilation: +300 ms).
    # Both sides are narrowed to the queryset's owners, which the indexes start with: for the
    # API's queryset (one owner's), PostgreSQL reads that owner's matches only.
    owners = queryset.order_by().values("owner_id")
    titles = Conversation.objects.filter(owner__in=owners, title__fulltext=text)
    texts = Message.objects.filter(conversation__search_owner_in=owners, content__fulltext=text)
    return queryset.filter(
        pk__in=titles.order_by().values("pk").union(texts.order_by().values("conversation_id"))
    )


# The WINDOW most recently written matching messages of the user, ranked, and their
# conversations' scores with the titles' (ts_rank's weights: A is 1.0, messages' D 0.1).
# {order} is how the messages are found (see recent_first). Messages are found by the owner
# each holds (migration 0012), which the indexes start with, so other users' are never read;
# their conversation's owner is checked all the same. {narrow} and {narrow_c} hold the filters
# typed, if any, as a condition on the conversation (see narrowed).
_RANKED = """
WITH hits AS MATERIALIZED (
    SELECT m.id, m.conversation_id, c.updated_at, m.search_vector
    FROM conversations_message m
    JOIN conversations_conversation c ON c.id = m.conversation_id
    WHERE m.search_owner_id = %s AND c.owner_id = %s AND m.search_vector @@ {q}{narrow_c}
    ORDER BY {order}
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
    WHERE owner_id = %s AND {title_vector} @@ {q}{narrow}
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
    owner_id: int, text: str, offset: int, *, recent_first: bool, filters: Filters | None = None
) -> tuple[str, list[Any]]:
    """The page's query and its parameters (the benchmark EXPLAINs it)."""
    q, q_params = tsquery(text)
    narrow, narrow_params = narrowed(owner_id, filters or Filters())
    # Newest first walks the owner's messages in their (owner, -id) index (migration 0013: by
    # the id, the planner walked the primary key, everyone's newer messages first). "m.id + 0"
    # is no index's order, so the planner cannot walk one: it takes the GIN index, then sorts
    # what it found.
    order = "- m.id" if recent_first else "m.id + 0 DESC"
    sql = _RANKED.format(
        q=q,
        title_vector=VECTOR.format("title"),
        order=order,
        narrow=narrow.format(table="conversations_conversation"),
        narrow_c=narrow.format(table="c"),
    )
    window = window_for(text)
    params = [
        owner_id, owner_id, *q_params, *narrow_params, window,  # hits
        *q_params,  # in_messages
        *q_params, owner_id, *q_params, *narrow_params, window,  # in_titles
        PAGE_SIZE + 1, offset,
    ]  # fmt: skip
    return sql, params


def narrowed(owner_id: int, filters: Filters) -> tuple[str, list[Any]]:
    """The filters as SQL to add to a WHERE on the conversations table ({table}: its alias),
    and its parameters; nothing without filters, so that a plain search's plan is unchanged.
    The owner's conversations that hold them, as Django writes the query (a project's name
    is a join)."""
    if not filters:
        return "", []
    holding = Conversation.objects.filter(filters.q(), owner_id=owner_id).order_by().values("pk")
    sql, params = holding.query.sql_with_params()
    # The subquery's own braces are no placeholders of format().
    sql = sql.replace("{", "{{").replace("}", "}}")
    return f" AND {{table}}.id IN ({sql})", list(params)


def window_for(text: str) -> int:
    """How many of the newest matching messages are ranked: fewer for a phrase."""
    return PHRASE_WINDOW if text.count('"') >= 2 else WINDOW


def ranked(owner_id: int, text: str, offset: int, filters: Filters) -> list[tuple[Any, int | None]]:
    """A page (and one more, to tell if there is a next) of the owner's matching conversations
    that hold `filters`, best first: each conversation's id and its best matching message's
    (None: only its title)."""
    with connections["default"].cursor() as cursor:
        walk = recent_first(cursor, text, owner_id=owner_id)
        sql, params = ranked_sql(owner_id, text, offset, recent_first=walk, filters=filters)
        cursor.execute(sql, params)
        return [(pk, best) for pk, best in cursor.fetchall()]


# Reading a message's vector to match it costs about 2 µs; the index, about 6 µs a match
# (the row it points to is fetched). Walking the owner's newest messages costs WINDOW / share of
# messages that match x 2 µs, the index matches x 6 µs: the walk wins once more than
# sqrt(WINDOW x messages / 3) match (8,000 of 200,000 at a WINDOW of 1,000).
_RECENT_FIRST_FACTOR = 1 / 3


def recent_first(cursor: Any, text: str, *, owner_id: int) -> bool:
    """Whether to find the owner's WINDOW newest matches by walking their messages newest first
    (a common word: it soon has enough) rather than through the GIN index (a rarer one).

    The planner would choose by itself, but it prices the match of a row at a fraction of
    its cost, and walked the messages for words in 2-5% of them: 100-140 ms where the index
    took 30-40. Its estimates of how many of the owner's messages there are, and match, are
    good enough, and decide here. (They are statistics: the share of matches is the word's
    across all messages. Either way only the owner's messages are read.)"""
    q, q_params = tsquery(text)
    mine = "SELECT 1 FROM conversations_message WHERE search_owner_id = %s"
    matching = _estimated_rows(cursor, f"{mine} AND search_vector @@ {q}", [owner_id, *q_params])
    messages = max(_estimated_rows(cursor, mine, [owner_id]), 1)
    return bool(matching * matching > _RECENT_FIRST_FACTOR * window_for(text) * messages)


def _estimated_rows(cursor: Any, sql: str, params: list[Any]) -> float:
    cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
    rows: float = cursor.fetchone()[0][0]["Plan"]["Plan Rows"]
    return rows
