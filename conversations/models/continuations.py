"""GatewayPath: a gateway message's path from its conversation's root, as one indexed digest."""

from django.db import models

from conversations.models.messages import Message


class GatewayPath(models.Model):
    """The digest of the role and content of every message from the conversation's root down to
    this one, chained and salted with the conversation's API token (gateway.continuation): a
    call whose history has the same digest continues the conversation here, found with one
    indexed look-up however long the history. Only the gateway writes these, for the messages
    of a token's recorded calls; a message added in the chat page has none."""

    message = models.OneToOneField(
        Message, on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    digest = models.CharField(max_length=64, db_index=True)

    def __str__(self) -> str:
        return f"path of message {self.message_id}"
