"""Fill one user's history with made-up conversations, for measuring search at scale.

    python manage.py seed_search_data --user bench --conversations 10000 --messages 200000

The text is drawn from a vocabulary with a Zipf distribution, as words are in real text: a
few words are in nearly every message, most are rare. Some real words sit at chosen ranks so
that a benchmark has terms of known frequency to look for (SEEDED_WORDS). The same --seed gives
the same history. Rows go in with bulk_create, a batch at a time, so 200,000 messages take
well under a minute; the user's earlier conversations are deleted first.
"""

from __future__ import annotations

import itertools
import random
import time
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils import timezone

from conversations.models import Conversation, Message

BATCH = 2_000
VOCABULARY = 40_000
SYLLABLES = [consonant + vowel for consonant in "bklmnrstv" for vowel in "aeio"]
# Real words at fixed Zipf ranks (1 = the most frequent): the benchmark's terms, from a word in
# most messages to one in a few dozen.
SEEDED_WORDS = {
    "the": 1,
    "python": 40,
    "deployment": 400,
    "deploying": 900,
    "kubernetes": 4_000,
    "zeppelin": 30_000,
}


def vocabulary(rng: random.Random) -> list[str]:
    """VOCABULARY made-up words (three or four syllables), with SEEDED_WORDS at their ranks."""
    words: list[str] = []
    seen = set(SEEDED_WORDS)
    while len(words) < VOCABULARY:
        word = "".join(rng.choices(SYLLABLES, k=rng.choice((3, 4))))
        if word not in seen:
            seen.add(word)
            words.append(word)
    for word, rank in sorted(SEEDED_WORDS.items(), key=lambda item: item[1]):
        words.insert(rank - 1, word)
    return words[:VOCABULARY]


class TextMaker:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.words = vocabulary(rng)
        # Zipf with s = 1.07, about what English text shows.
        self.cum_weights = list(
            itertools.accumulate(1 / rank**1.07 for rank in range(1, VOCABULARY + 1))
        )

    def text(self, low: int, high: int) -> str:
        words = self.rng.choices(
            self.words, cum_weights=self.cum_weights, k=self.rng.randint(low, high)
        )
        return " ".join(words).capitalize() + "."


class Command(BaseCommand):
    help = "Replace a user's conversations with made-up ones, for benchmarking search."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", required=True, help="Username; made if missing.")
        parser.add_argument("--conversations", type=int, default=10_000)
        parser.add_argument("--messages", type=int, default=200_000, help="In all.")
        parser.add_argument("--seed", type=int, default=1)

    def handle(self, *args: Any, **options: Any) -> None:
        conversations, messages = options["conversations"], options["messages"]
        if conversations < 1 or messages < 0:
            raise CommandError("--conversations must be at least 1 and --messages at least 0.")
        started = time.monotonic()
        rng = random.Random(options["seed"])
        maker = TextMaker(rng)
        user, made = get_user_model().objects.get_or_create(username=options["user"])
        if made:
            user.set_unusable_password()
            user.save()
        Conversation.objects.filter(owner=user).delete()

        now = timezone.now()
        rows = [
            Conversation(owner=user, title=maker.text(2, 6)[:200].rstrip("."))
            for _ in range(conversations)
        ]
        Conversation.objects.bulk_create(rows, batch_size=BATCH)
        # Spread over a year (auto_now set them all to now): the newest-first order is not
        # the order they were made in. bulk_update writes the values as given.
        for conversation in rows:
            conversation.updated_at = now - timedelta(seconds=rng.randint(0, 365 * 86_400))
            conversation.created_at = conversation.updated_at - timedelta(hours=rng.randint(0, 48))
        Conversation.objects.bulk_update(rows, ["created_at", "updated_at"], batch_size=BATCH)

        # Turns alternate question and answer; answers are longer. Each conversation is a plain
        # list (no current_leaf), which the page shows in order.
        owners = itertools.chain.from_iterable(
            itertools.repeat(c, messages // conversations + (i < messages % conversations))
            for i, c in enumerate(rows)
        )
        batch: list[Message] = []
        previous: Conversation | None = None
        turn = 0
        for conversation in owners:
            turn = turn + 1 if conversation is previous else 0
            previous = conversation
            role, text = (
                ("user", maker.text(5, 40)) if turn % 2 == 0 else ("assistant", maker.text(20, 200))
            )
            batch.append(Message(conversation=conversation, role=role, content=text))
            if len(batch) == BATCH:
                self._save(batch)
                batch = []
        self._save(batch)
        self.stdout.write(
            f"{options['user']}: {conversations} conversations, {messages} messages "
            f"in {time.monotonic() - started:.1f} s"
        )

    @staticmethod
    def _save(batch: list[Message]) -> None:
        with transaction.atomic():
            Message.objects.bulk_create(batch)
