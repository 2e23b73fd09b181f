"""TokenUsage: the tokens a user's replies used, a row per user, day and model; and
FirstTokenTimes, how long the replies waited for their first token, a day and model at a time.

A ledger, not a view of the messages: written as each reply is saved for the last time (and as
a title is written), it keeps what was used when the conversations, messages or the whole
history are deleted, so budgets and the staff's totals never give anything back.
"""

import math

from django.conf import settings
from django.db import models


class TokenUsage(models.Model):
    # Kept when the account is deleted: the totals of the day and the model stay true.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="token_usage"
    )
    day = models.DateField()  # in settings.TIME_ZONE, where budgets reset
    model_slug = models.SlugField(max_length=64)
    replies = models.PositiveIntegerField(default=0)
    cancelled = models.PositiveIntegerField(default=0)  # of them, stopped by a Stop
    titles = models.PositiveIntegerField(default=0)  # titles written by the model
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["-day", "model_slug"]
        verbose_name_plural = "token usage"
        constraints = [
            models.UniqueConstraint(
                fields=["user", "day", "model_slug"], name="one_usage_row_a_day"
            )
        ]
        indexes = [models.Index(fields=["day"], name="usage_by_day")]

    def __str__(self) -> str:
        return f"{self.user} on {self.day}, {self.model_slug}: {self.tokens} tokens"

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class FirstTokenTimes(models.Model):
    """How long replies waited for their first token, a day and a model at a time: how many
    fell in each bucket of a log scale, each GROWTH times as wide as the one before.

    A rollup, for the usage page: its percentiles per model read a few hundred rows for a year,
    not the year's messages, and come within 5% of the exact ones (half a bucket). Written with
    the ledger, as each reply is saved for the last time, so deleting replies changes nothing.
    """

    GROWTH = 1.1

    day = models.DateField()  # in settings.TIME_ZONE, as the ledger's
    model_slug = models.SlugField(max_length=64)
    bucket = models.SmallIntegerField()  # GROWTH ** bucket ms, see bucket_of
    replies = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-day", "model_slug", "bucket"]
        verbose_name_plural = "first token times"
        constraints = [
            models.UniqueConstraint(
                fields=["day", "model_slug", "bucket"], name="one_first_token_bucket_a_day"
            )
        ]

    def __str__(self) -> str:
        return f"{self.model_slug} on {self.day}: {self.replies} at about {self.ms:.0f} ms"

    @classmethod
    def bucket_of(cls, ms: float) -> int:
        """The bucket of a time: the nearest power of GROWTH (1 ms and less: bucket 0)."""
        return round(math.log(max(ms, 1.0), cls.GROWTH))

    @classmethod
    def ms_of(cls, bucket: int) -> float:
        return float(cls.GROWTH**bucket)

    @property
    def ms(self) -> float:
        return self.ms_of(self.bucket)
