"""A user's preferences: how the pages look, and what their new conversations start with."""

from django.conf import settings
from django.db import models


class UserPreferences(models.Model):
    """How the pages look for one user, and the defaults of their new conversations; a user
    without a row gets the site's defaults."""

    class Theme(models.TextChoices):
        SYSTEM = "system"  # follow the browser's prefers-color-scheme
        LIGHT = "light"
        DARK = "dark"

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="preferences"
    )
    theme = models.CharField(max_length=8, choices=Theme.choices, default=Theme.SYSTEM)
    # A new conversation outside a project starts with these (services.conversations); a
    # project's own model and instructions win inside it. Empty: the model's defaults.
    default_instructions = models.TextField(blank=True)
    default_model_slug = models.CharField(max_length=50, blank=True)
    # One of settings.LANGUAGES; empty follows the browser's Accept-Language.
    language = models.CharField(max_length=16, choices=settings.LANGUAGES, blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "user preferences"

    def __str__(self) -> str:
        return f"preferences of user {self.user_id}"
