"""Attachments' files go with their conversation (and so with its owner's account): the rows
go by the database's cascade, the files from storage once that delete has committed."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models.signals import pre_delete
from django.dispatch import receiver

from conversations.models import Attachment, Conversation

logger = logging.getLogger("chatsite.attachments")


def delete_files_after_commit(names: Iterable[str]) -> None:
    """Delete stored files once the transaction that let go of their rows commits (a rollback
    keeps both)."""
    kept = [name for name in names if name]
    if kept:
        transaction.on_commit(lambda: _delete(kept))


def _delete(names: list[str]) -> None:
    for name in names:
        try:
            default_storage.delete(name)
        except OSError:  # a file left behind is logged, not a failed delete of a conversation
            logger.exception("could not delete the attachment file %s", name)


@receiver(pre_delete, sender=Conversation)
def files_go_with_their_conversation(sender: Any, instance: Conversation, **kwargs: Any) -> None:
    delete_files_after_commit(
        Attachment.objects.filter(conversation=instance).values_list("file", flat=True)
    )
