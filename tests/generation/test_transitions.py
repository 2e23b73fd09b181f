"""A reply's status changes only along the table in Message.TRANSITIONS, and races have one winner."""

from __future__ import annotations

from typing import Any

import pytest

from conversations.models import Message

pytestmark = [pytest.mark.django_db]

Status = Message.Status


@pytest.fixture
def reply(conversation: Any) -> Message:
    return Message.objects.create(
        conversation=conversation, role=Message.Role.ASSISTANT, status=Status.PENDING
    )


def test_a_pending_reply_streams_then_finishes(reply: Message) -> None:
    assert Message.objects.transition(reply.pk, from_={Status.PENDING}, to=Status.STREAMING)
    assert Message.objects.transition(
        reply.pk, from_=Message.ACTIVE_STATUSES, to=Status.COMPLETE, content="hi"
    )
    reply.refresh_from_db()
    assert (reply.status, reply.content) == (Status.COMPLETE, "hi")


def test_the_second_of_two_racing_writers_loses_and_changes_nothing(reply: Message) -> None:
    assert Message.objects.transition(
        reply.pk, from_=Message.ACTIVE_STATUSES, to=Status.INTERRUPTED
    )
    lost = Message.objects.transition(
        reply.pk, from_=Message.ACTIVE_STATUSES, to=Status.COMPLETE, content="late"
    )
    assert not lost
    reply.refresh_from_db()
    assert (reply.status, reply.content) == (Status.INTERRUPTED, "")


def test_a_flush_writes_only_while_the_reply_is_active(reply: Message) -> None:
    assert Message.objects.transition(reply.pk, from_=Message.ACTIVE_STATUSES, to=None, content="a")
    Message.objects.transition(reply.pk, from_=Message.ACTIVE_STATUSES, to=Status.CANCELLED)
    assert not Message.objects.transition(
        reply.pk, from_=Message.ACTIVE_STATUSES, to=None, content="b"
    )
    reply.refresh_from_db()
    assert reply.content == "a"


@pytest.mark.parametrize(
    "settled", [Status.COMPLETE, Status.CANCELLED, Status.ERROR, Status.INTERRUPTED]
)
def test_a_settled_status_is_final(reply: Message, settled: Message.Status) -> None:
    with pytest.raises(ValueError, match="cannot go"):
        Message.objects.transition(reply.pk, from_={settled}, to=Status.STREAMING)
    with pytest.raises(ValueError, match="cannot go"):
        Message.objects.transition(reply.pk, from_={settled}, to=None)


def test_a_reply_never_goes_back_to_pending(reply: Message) -> None:
    with pytest.raises(ValueError):
        Message.objects.transition(reply.pk, from_={Status.STREAMING}, to=Status.PENDING)
