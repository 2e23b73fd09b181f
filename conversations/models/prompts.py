"""Saved prompts: a user's reusable messages, with `{{name}}` variables filled in when used."""

import re

from django.conf import settings
from django.db import models
from django.db.models import Q

from conversations.types import AnyUser

# A variable as written in a prompt's text: `{{name}}`, spaces inside the braces allowed. What is
# between the braces is checked against VARIABLE_NAME when the prompt is saved.
VARIABLE = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
VARIABLE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def variables_in(text: str) -> list[str]:
    """The names of the variables in a prompt's text, each once, in the order they first appear."""
    return list(dict.fromkeys(VARIABLE.findall(text)))


class SavedPromptQuerySet(models.QuerySet["SavedPrompt"]):
    def owned_by(self, user: AnyUser) -> "SavedPromptQuerySet":
        """The prompts `user` may change: their own."""
        if not user.is_authenticated:
            return self.none()
        return self.filter(owner=user)

    def visible_to(self, user: AnyUser) -> "SavedPromptQuerySet":
        """The prompts `user` may read and use: their own and those shared with their groups."""
        if not user.is_authenticated:
            return self.none()
        return self.filter(Q(owner=user) | Q(group__in=user.groups.all())).distinct()


class SavedPrompt(models.Model):
    """A message a user keeps to send again, typed `/` in the composer to pick it. Its text may
    hold `{{name}}` variables, asked for before it is put in the composer. Shared with one of its
    owner's groups, the group's members can use it but not change it."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="saved_prompts"
    )
    title = models.CharField(max_length=100)
    text = models.TextField()
    group = models.ForeignKey(
        "auth.Group",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,  # a deleted group leaves its prompts to their owners
        related_name="saved_prompts",
        help_text="Shared read-only with this group's members; empty: personal.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = SavedPromptQuerySet.as_manager()

    class Meta:
        ordering = ["title", "id"]

    def __str__(self) -> str:
        return self.title

    @property
    def variables(self) -> list[str]:
        return variables_in(self.text)
