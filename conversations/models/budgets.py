"""Budget: tokens a day and a month for one user or one group, over the defaults
(CHAT_TOKENS_PER_DAY, CHAT_TOKENS_PER_MONTH); see conversations.services.budgets for which one
applies."""

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.db.models import Q


class Budget(models.Model):
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="budget",
    )
    group = models.OneToOneField(
        Group, null=True, blank=True, on_delete=models.CASCADE, related_name="budget"
    )
    # Empty: the default for that period; 0: no limit.
    tokens_per_day = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Empty: the default (CHAT_TOKENS_PER_DAY). 0: no limit."
    )
    tokens_per_month = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Empty: the default (CHAT_TOKENS_PER_MONTH). 0: no limit."
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(user__isnull=False, group__isnull=True)
                | Q(user__isnull=True, group__isnull=False),
                name="a_budget_is_a_users_or_a_groups",
            )
        ]

    def __str__(self) -> str:
        return f"Budget of {self.user or self.group}"
