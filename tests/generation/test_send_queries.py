"""A crowd of sends waits for each other's queries: a send makes few, and the same few whatever
the conversation holds."""

from __future__ import annotations

from typing import Any

import pytest

from conversations.generation.replies import Send, Turn, reply_create
from conversations.models import Conversation, Message

pytestmark = [pytest.mark.django_db(transaction=True)]

# The transaction (2), the owner's row, the session, the conversation's row, the user's groups,
# the admin's models, the limits' one count, the budgets that apply, the two messages, the
# conversation's update, the user message's version, and the history read after the commit. It
# was 24 before the save read the conversation once and the limits in one count (sends.save).
QUERIES_PER_SEND = 14


def socket_send(conversation: Conversation, session_key: str, content: str) -> Send:
    return Send(
        conversation=conversation,
        turn=Turn(content=content),
        idempotency_key=content,
        session_key=session_key,
        user_id=conversation.owner_id,
    )


def test_a_send_makes_the_same_few_queries_however_long_the_conversation(
    alice: Any, client: Any, django_assert_max_num_queries: Any
) -> None:
    client.force_login(alice)
    session_key = client.session.session_key
    conversation = Conversation.objects.create(owner=alice)
    for turn in range(5):
        reply_create(socket_send(conversation, session_key, f"turn {turn}"))
        Message.objects.filter(conversation=conversation).active().update(
            status=Message.Status.COMPLETE, content=f"answer {turn}"
        )

    with django_assert_max_num_queries(QUERIES_PER_SEND):
        plan = reply_create(socket_send(conversation, session_key, "one more"))

    assert len(plan.history) == 11  # the five turns before, and the message just sent
    assert plan.started.title == "turn 0"
