"""Attachments: a file a user put in a message, kept through Django's storage API with the text
read from it once, when it arrived."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_noop as _


class Kind(models.TextChoices):
    """What chatsite reads: the kinds conversations.attachments.kinds tells from a file's bytes
    (CSV, JSON, Markdown and code are text).

    The labels are English in the prompt the model reads, whoever sends it: only marked here
    (gettext_noop), and translated where a page shows them ({% translate %} of the label)."""

    PDF = "application/pdf", "PDF"
    DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document", "DOCX"
    TEXT = "text/plain", _("text")
    PNG = "image/png", _("PNG image")
    JPEG = "image/jpeg", _("JPEG image")
    GIF = "image/gif", _("GIF image")
    WEBP = "image/webp", _("WebP image")

    @property
    def is_image(self) -> bool:
        return self.value.startswith("image/")


def storage_key(attachment: Attachment, filename: str) -> str:
    """Where the file is stored: a key chatsite makes, never a part of the name it was sent
    with (a name is shown, not trusted: it may hold a path, or be the same as another's)."""
    return f"attachments/{attachment.owner_id}/{attachment.pk.hex}"


class AttachmentQuerySet(models.QuerySet["Attachment"]):
    def pending(self) -> AttachmentQuerySet:
        """Uploaded from a composer, not yet sent with a message."""
        return self.filter(message__isnull=True)


class Attachment(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="attachments"
    )
    # The conversation whose composer took it: it can be sent only there.
    conversation = models.ForeignKey(
        "conversations.Conversation", on_delete=models.CASCADE, related_name="attachments"
    )
    # The user message it was sent with; null while it waits in the composer.
    message = models.ForeignKey(
        "conversations.Message",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="attachments",
    )
    name = models.CharField(max_length=200)  # as shown (attachments.names.shown_name)
    kind = models.CharField(max_length=100, choices=Kind.choices)
    size = models.PositiveBigIntegerField()  # bytes
    file = models.FileField(upload_to=storage_key, max_length=200)
    text = models.TextField(blank=True)  # what the prompt carries; empty for an image
    # Its text's cost in the context window of the model it was counted for (engine_key),
    # and whether that was the engine's tokenizer or an estimate.
    tokens = models.PositiveIntegerField(default=0)
    tokens_estimated = models.BooleanField(default=True)
    counted_for = models.CharField(max_length=100, blank=True)
    position = models.PositiveSmallIntegerField(default=0)  # its place in the message
    created_at = models.DateTimeField(auto_now_add=True)

    objects = AttachmentQuerySet.as_manager()

    class Meta:
        ordering = ["message_id", "position", "created_at"]
        indexes = [models.Index(fields=["owner", "conversation"], name="attachment_composer")]

    def __str__(self) -> str:
        return self.name

    @property
    def is_image(self) -> bool:
        return Kind(self.kind).is_image
