"""Search on SQLite and other databases: a case-insensitive contains query. Every word must appear
in the title or in one message; titles that match come first, then the most recently active."""

from __future__ import annotations

from functools import reduce
from operator import and_
from typing import Any

from django.db.models import BooleanField, Exists, ExpressionWrapper, OuterRef, Q, Subquery

from conversations.models import Conversation, ConversationQuerySet, Message
from conversations.search.filters import Filters
from conversations.search.query import PAGE_SIZE, contains_terms
from conversations.types import AnyUser


def ranked(user: AnyUser, text: str, offset: int, filters: Filters) -> list[tuple[Any, int | None]]:
    """As postgresql.ranked: a page and one more of (conversation id, best message id or None)
    of the user's conversations that hold `filters`."""
    words = contains_terms(text)
    in_title = reduce(and_, (Q(title__icontains=w) for w in words))
    messages = Message.objects.filter(
        reduce(and_, (Q(content__icontains=w) for w in words)), conversation=OuterRef("pk")
    ).order_by("-id")
    found = (
        Conversation.objects.visible_to(user)
        .filter(filters.q())
        .annotate(
            title_matches=ExpressionWrapper(in_title, output_field=BooleanField()),
            best=Subquery(messages.values("pk")[:1]),
        )
        .filter(Q(title_matches=True) | Q(best__isnull=False))
        .order_by("-title_matches", "-updated_at", "-pk")
        .values_list("pk", "best")
    )
    return list(found[offset : offset + PAGE_SIZE + 1])


def matching(queryset: ConversationQuerySet, text: str) -> ConversationQuerySet:
    """filter_matching elsewhere: every word in the title, or every word in one message."""
    words = contains_terms(text)
    in_title = reduce(and_, (Q(title__icontains=w) for w in words))
    messages = Message.objects.filter(conversation=OuterRef("pk"))
    in_messages = Exists(messages.filter(reduce(and_, (Q(content__icontains=w) for w in words))))
    return queryset.filter(in_title | in_messages)
