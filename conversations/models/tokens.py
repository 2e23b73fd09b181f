"""Personal API tokens: keys for the REST API and the gateway, stored as hashes."""

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from conversations.types import AnyUser


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def active(self) -> "ApiTokenQuerySet":
        return self.filter(revoked_at__isnull=True)

    def owned_by(self, user: AnyUser) -> "ApiTokenQuerySet":
        if not user.is_authenticated:
            return self.none()
        return self.filter(user=user)


class ApiToken(models.Model):
    """A personal key for the REST API, sent as `Authorization: Bearer <key>`.

    Only a hash of the key is stored; the key itself is shown once, when it is created.
    """

    class Recording(models.TextChoices):
        """Whether the gateway keeps this token's calls as conversations."""

        DEFAULT = "default", _("As the server does (CHAT_GATEWAY_RECORD)")
        ALL = "all", _("Every call")
        NONE = "none", _("No call")

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    # The first characters of the key, so its owner can tell their keys apart.
    prefix = models.CharField(max_length=16)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    recording = models.CharField(max_length=8, choices=Recording.choices, default=Recording.DEFAULT)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    @property
    def records_calls(self) -> bool:
        """Whether its gateway calls are kept as conversations: its own choice, else the server's."""
        if self.recording == self.Recording.DEFAULT:
            return bool(settings.CHAT_GATEWAY_RECORD)
        return self.recording == self.Recording.ALL
