"""Share links: read-only snapshots of a conversation, reachable by a secret link."""

from django.conf import settings
from django.db import models

from conversations.types import AnyUser


class ShareSnapshot(models.Model):
    """The messages a share link shows: one branch of a conversation, as it was at one moment.

    Stored once per state of the branch (the digest is the SHA-256 of its messages, see
    services.shares.snapshot_digest) and shared by every link made while the branch was in that
    state, so that many links to a long conversation cost its text once. It holds, for each
    message, only what a reader sees (services.shares.SNAPSHOT_FIELDS): later messages, other
    versions, the owner and ids never reach it. It is deleted when its last live link is revoked.
    """

    conversation = models.ForeignKey(
        "conversations.Conversation", on_delete=models.CASCADE, related_name="share_snapshots"
    )
    digest = models.CharField(max_length=64)
    messages = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "digest"], name="share_snapshot_once_per_branch_state"
            )
        ]

    def __str__(self) -> str:
        return f"snapshot {self.digest[:12]} of {self.conversation_id}"


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
    The link holds the title it shows and how many messages its snapshot holds; the messages are
    in its ShareSnapshot, shared with the other links to the same state of the branch. A revoked
    link keeps its row (a record that it existed) but may lose its snapshot (snapshot is None).
    """

    conversation = models.ForeignKey(
        "conversations.Conversation", on_delete=models.CASCADE, related_name="share_links"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="share_links"
    )
    token_hash = models.CharField(max_length=64, unique=True)
    title = models.CharField(max_length=200, blank=True)
    snapshot = models.ForeignKey(
        ShareSnapshot, null=True, blank=True, on_delete=models.SET_NULL, related_name="links"
    )
    message_count = models.PositiveIntegerField(default=0)
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
