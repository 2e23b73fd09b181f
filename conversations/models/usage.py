"""TokenUsage: the tokens a user's replies used, a row per user, day and model.

A ledger, not a view of the messages: written as each reply is saved for the last time (and as
a title is written), it keeps what was used when the conversations, messages or the whole
history are deleted, so budgets and the staff's totals never give anything back.
"""

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
