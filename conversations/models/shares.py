"""Share links: read-only snapshots of a conversation, reachable by a secret link."""

from django.conf import settings
from django.db import models

from conversations.types import AnyUser


class ShareLinkQuerySet(models.QuerySet["ShareLink"]):
    def active(self) -> "ShareLinkQuerySet":
        return self.filter(revoked_at__isnull=True)

    def owned_by(self, user: AnyUser) -> "ShareLinkQuerySet":
        """Links to the user's own conversations: the ones they may see and revoke."""
        if not user.is_authenticated:
            return self.none()
        return self.filter(conversation__owner=user)


class ShareLink(models.Model):
    """A read-only link to a snapshot of a conversation, as it was when the link was made.

    Only a hash of the link's token is stored; the link itself is shown once, when it is made.
    The snapshot holds the title and, for each message of the branch shown, only what a reader
    sees (see services.shares.SNAPSHOT_FIELDS): later messages, other versions, the owner and
    ids never reach it.
    """

    conversation = models.ForeignKey(
        "conversations.Conversation", on_delete=models.CASCADE, related_name="share_links"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="share_links"
    )
    token_hash = models.CharField(max_length=64, unique=True)
    title = models.CharField(max_length=200, blank=True)
    messages = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ShareLinkQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"share of {self.title or 'New conversation'} ({self.created_at:%Y-%m-%d %H:%M})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    @property
    def message_count(self) -> int:
        return len(self.messages)
