"""Token budgets (issue 26): a day's and a month's, the default or the most generous of a user's
groups' or the user's own; checked before the engine is called on every surface (the socket, the
gateway, titles), never given back by deleting; a reply under way finishes. The ledger they read
holds the sum of the replies' tokens."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import Group
from django.db.models import F, Sum
from django.utils import timezone

from conversations.generation import titles
from conversations.models import Budget, Conversation, FirstTokenTimes, Message, TokenUsage
from conversations.services import budgets
from tests.support.sockets import finished

pytestmark = [pytest.mark.django_db(transaction=True)]

MS = timedelta(milliseconds=1)


@pytest.fixture(autouse=True)
def short_replies(settings: Any, scripted_engine: Any) -> None:
    scripted_engine.tokens = 5
    settings.CHAT_AUTO_TITLES = False  # a title's tokens count too: one test turns them on


async def reply_through(socket: Any, content: str) -> dict[str, Any]:
    await socket.send(action="send", content=content)
    events = await socket.receive_until(lambda e: finished(e) or e["type"] == "error")
    return events[-1]


@database_sync_to_async
def tokens_of_replies(user: Any) -> int:
    """What the messages say the user's replies used (while they still exist)."""
    replies = Message.objects.filter(conversation__owner=user, role=Message.Role.ASSISTANT)
    total = replies.aggregate(t=Sum(F("prompt_tokens") + F("completion_tokens")))["t"]
    return int(total or 0)


@database_sync_to_async
def ledger_of(user: Any) -> dict[str, int]:
    row = TokenUsage.objects.filter(user=user).aggregate(
        replies=Sum("replies"),
        cancelled=Sum("cancelled"),
        titles=Sum("titles"),
        tokens=Sum(F("prompt_tokens") + F("completion_tokens")),
    )
    return {key: int(value or 0) for key, value in row.items()}


async def test_a_used_day_refuses_the_next_send_with_its_reset_even_after_deleting_everything(
    connect: Any, alice: Any, conversation: Conversation, settings: Any
) -> None:
    settings.CHAT_TOKENS_PER_DAY = 10  # one reply of 5 tokens and its prompt use it up
    socket, _, _ = await connect(alice, conversation.pk)
    first = await reply_through(socket, "Hello")
    assert first["message"]["status"] == "complete"
    used = await tokens_of_replies(alice)
    assert used >= 10
    assert (await ledger_of(alice))["tokens"] == used

    # Deleting every conversation gives nothing back: the ledger is not the messages.
    await socket.close()
    await database_sync_to_async(Conversation.objects.filter(owner=alice).delete)()
    assert await tokens_of_replies(alice) == 0
    fresh = await database_sync_to_async(Conversation.objects.create)(owner=alice)
    socket, _, _ = await connect(alice, fresh.pk)
    refused = await reply_through(socket, "Again")

    assert refused["type"] == "error" and refused["code"] == "budget_exhausted"
    tomorrow = timezone.localdate() + timedelta(days=1)
    assert f"resets on {tomorrow:%Y-%m-%d} at 00:00" in refused["message"]
    assert not await database_sync_to_async(fresh.messages.exists)()  # nothing was written


async def test_a_reply_under_way_when_the_budget_runs_out_finishes(
    connect: Any, alice: Any, conversation: Conversation, settings: Any, scripted_engine: Any
) -> None:
    settings.CHAT_TOKENS_PER_DAY = 3
    scripted_engine.tokens = 20  # far past the budget
    socket, _, _ = await connect(alice, conversation.pk)
    reply = await reply_through(socket, "Tell me a story")
    assert reply["message"]["status"] == "complete"
    row = await database_sync_to_async(Message.objects.get)(pk=reply["message"]["id"])
    assert row.completion_tokens == 20


def test_the_most_generous_group_wins_and_the_users_own_budget_over_it(
    alice: Any, settings: Any
) -> None:
    settings.CHAT_TOKENS_PER_DAY = 100
    settings.CHAT_TOKENS_PER_MONTH = 1000
    research, interns, everyone = (Group.objects.create(name=n) for n in ("r", "i", "e"))
    alice.groups.add(research, interns, everyone)
    Budget.objects.create(group=research, tokens_per_day=50_000)
    Budget.objects.create(group=interns, tokens_per_day=500, tokens_per_month=0)  # 0: no limit
    Budget.objects.create(group=everyone, tokens_per_day=None)  # the default, not a limit
    assert budgets.allowance(alice) == budgets.Allowance(per_day=50_000, per_month=0)

    Budget.objects.create(user=alice, tokens_per_day=20)
    assert budgets.allowance(alice) == budgets.Allowance(per_day=20, per_month=0)


async def test_a_groups_larger_budget_lets_a_send_through_the_default_refuses(
    connect: Any, alice: Any, users: dict[str, Any], settings: Any
) -> None:
    settings.CHAT_TOKENS_PER_DAY = 1
    bob = users["bob"]

    @database_sync_to_async
    def setup() -> tuple[Conversation, Conversation]:
        research = Group.objects.create(name="research")
        Budget.objects.create(group=research, tokens_per_day=100_000)
        alice.groups.add(research)
        for user in (alice, bob):
            budgets.record_usage(
                user_id=user.pk, model_slug="default", prompt_tokens=40, completion_tokens=2
            )
        return (
            Conversation.objects.create(owner=alice),
            Conversation.objects.create(owner=bob),
        )

    alices, bobs = await setup()
    socket, _, _ = await connect(alice, alices.pk)
    assert (await reply_through(socket, "Hi"))["message"]["status"] == "complete"
    socket, _, _ = await connect(bob, bobs.pk)
    assert (await reply_through(socket, "Hi"))["code"] == "budget_exhausted"


async def test_a_used_month_refuses_until_the_first_of_the_next(
    connect: Any, alice: Any, conversation: Conversation, settings: Any
) -> None:
    settings.CHAT_TOKENS_PER_MONTH = 100
    today = timezone.localdate()

    @database_sync_to_async
    def used_earlier_this_month() -> None:
        # Used on the first of the month (today, on the first): the month's, not today's.
        TokenUsage.objects.create(
            user=alice, day=today.replace(day=1), model_slug="default", prompt_tokens=100
        )

    await used_earlier_this_month()
    socket, _, _ = await connect(alice, conversation.pk)
    refused = await reply_through(socket, "Hi")
    next_month = (today.replace(day=1) + timedelta(days=32)).replace(day=1)
    assert refused["code"] == "budget_exhausted"
    assert "tokens for this month" in refused["message"]
    assert f"resets on {next_month:%Y-%m-%d}" in refused["message"]


async def test_the_ledger_holds_the_sum_of_the_replies_cancelled_ones_too(
    connect: Any, alice: Any, conversation: Conversation, scripted_engine: Any
) -> None:
    socket, _, _ = await connect(alice, conversation.pk)
    for turn in range(2):
        assert (await reply_through(socket, f"turn {turn}"))["message"]["status"] == "complete"
    scripted_engine.tokens = 200
    scripted_engine.delay_s = 0.02
    await socket.send(action="send", content="a long one")
    await socket.receive_until(lambda e: e["type"] == "message.delta")
    await socket.send(action="cancel")
    stopped = (await socket.receive_until(finished))[-1]
    assert stopped["message"]["status"] == "cancelled"

    ledger = await ledger_of(alice)
    assert ledger["replies"] == 3 and ledger["cancelled"] == 1
    assert ledger["tokens"] == await tokens_of_replies(alice)
    # Each reply's time to first token went into its day's and model's bucket.
    assert await first_token_buckets() == await buckets_of_replies(alice)


@database_sync_to_async
def first_token_buckets() -> Counter[tuple[str, int]]:
    return Counter(
        {(row.model_slug, row.bucket): row.replies for row in FirstTokenTimes.objects.all()}
    )


@database_sync_to_async
def buckets_of_replies(user: Any) -> Counter[tuple[str, int]]:
    replies = Message.objects.filter(conversation__owner=user, role=Message.Role.ASSISTANT)
    return Counter(
        (m.model_slug, FirstTokenTimes.bucket_of((m.first_token_at - m.created_at) / MS))
        for m in replies
    )


async def test_a_title_is_not_asked_for_past_the_budget_and_counts_within_it(
    connect: Any, alice: Any, settings: Any, scripted_engine: Any
) -> None:
    settings.CHAT_AUTO_TITLES = True
    settings.CHAT_TITLE_MODEL = "default"
    make = database_sync_to_async(Conversation.objects.create)
    within, past = await make(owner=alice), await make(owner=alice)

    socket, _, _ = await connect(alice, within.pk)
    await reply_through(socket, "Hello")
    async with asyncio.timeout(10):  # the title is written after the reply, in its own task
        while (await ledger_of(alice))["titles"] != 1:  # noqa: ASYNC110 (the database has no events)
            await asyncio.sleep(0.05)

    settings.CHAT_TOKENS_PER_DAY = 1  # already used
    asked = len(title_requests(scripted_engine))
    socket, _, _ = await connect(alice, past.pk)
    assert (await reply_through(socket, "Hello"))["code"] == "budget_exhausted"
    assert len(title_requests(scripted_engine)) == asked


def title_requests(engine: Any) -> list[Any]:
    return [r for r in engine.records.values() if r.messages[0].content == titles.INSTRUCTION]


def test_the_account_page_shows_what_was_used_of_the_budget(
    client: Any, alice: Any, settings: Any
) -> None:
    settings.CHAT_TOKENS_PER_DAY = 5000
    budgets.record_usage(
        user_id=alice.pk, model_slug="default", prompt_tokens=1200, completion_tokens=34
    )
    client.force_login(alice)
    page = client.get("/account/").content.decode()
    # Grouped as the page's language writes numbers (English here).
    today = page[page.index(">Today<") : page.index(">This month<")]
    assert "<td>1,234</td>" in today and "<td>5,000</td>" in today
    month = page[page.index(">This month<") : page.index("</table>", page.index(">This month<"))]
    assert "<td>1,234</td>" in month and "no limit" in month
