"""A conversation is a tree of messages, and one branch of it is shown and sent to the model.

Each message follows its `parent` (null for a conversation's first). Messages with the same
parent are versions of one turn: a regenerated reply, an edited question, a reply continued
after it was cut off. `Conversation.current_leaf` is the last message of the branch shown: the
page, the model's context and the Markdown export follow it from the first message down; every
version stays in the database, browsable ("2/3"), and in the JSON exports.

A conversation whose `current_leaf` is null was written as a plain list (rows created directly,
an import): it is shown in order, and the first turn taken on it links it into a line.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import transaction
from django.utils.translation import gettext as _

from conversations.events import broadcast
from conversations.events.payloads import MessagePayload, message_payload
from conversations.events.protocol import BranchChanged
from conversations.models import Attachment, Conversation, Message
from conversations.services.errors import ReplyInProgress, SendRefused


@dataclass(frozen=True)
class Version:
    """Where a message stands among the versions of its turn (1-based)."""

    index: int
    count: int
    previous_id: int | None
    next_id: int | None

    def as_list(self) -> list[int | None]:
        return [self.index, self.count, self.previous_id, self.next_id]


class NotOnThisConversation(SendRefused):
    code = "no_such_message"


def path_to(leaf_id: int | None, by_id: dict[int, Message]) -> list[Message]:
    """The messages from the first down to `leaf_id`, in order."""
    path: list[Message] = []
    seen: set[int] = set()
    current = by_id.get(leaf_id) if leaf_id is not None else None
    while current is not None and current.pk not in seen:  # a cycle cannot be made; be safe
        seen.add(current.pk)
        path.append(current)
        current = by_id.get(current.parent_id) if current.parent_id is not None else None
    path.reverse()
    return path


def versions(messages: Iterable[Message]) -> dict[int, Version]:
    """Each message's place among its siblings, oldest first."""
    siblings: dict[int | None, list[Message]] = defaultdict(list)
    for message in messages:
        siblings[message.parent_id].append(message)
    placed: dict[int, Version] = {}
    for group in siblings.values():
        group.sort(key=lambda m: (m.created_at, m.pk))
        for i, message in enumerate(group):
            placed[message.pk] = Version(
                index=i + 1,
                count=len(group),
                previous_id=group[i - 1].pk if i > 0 else None,
                next_id=group[i + 1].pk if i + 1 < len(group) else None,
            )
    return placed


ONLY_VERSION = Version(1, 1, None, None)


def shown(messages: list[Message], leaf_id: int | None) -> list[Message]:
    """Of a conversation's messages (in order), the branch shown, each with its `version`."""
    if leaf_id is None:  # a plain list
        for message in messages:
            message.version = ONLY_VERSION
        return messages
    placed = versions(messages)
    branch = path_to(leaf_id, {m.pk: m for m in messages})
    for message in branch:
        message.version = placed[message.pk]
    return branch


def place_all(messages: list[Message], leaf_id: int | None) -> list[Message]:
    """Every message of a conversation (in order), each with its `version` and `is_current`:
    for what shows all versions (the JSON exports, the admin)."""
    on_branch = {m.pk for m in shown(messages, leaf_id)}
    placed = versions(messages) if leaf_id is not None else {}
    for message in messages:
        message.version = placed.get(message.pk, ONLY_VERSION)
        message.is_current = message.pk in on_branch
    return messages


def visible_branch(conversation: Conversation) -> list[Message]:
    """The branch shown, each message with its `version` (one query for all the messages) and
    its attachments (one more)."""
    messages = list(Message.objects.filter(conversation=conversation).order_by("created_at", "id"))
    return with_attachments(shown(messages, conversation.current_leaf_id))


def with_attachments(messages: list[Message]) -> list[Message]:
    """The messages, each user message with its `shown_attachments` (in one query)."""
    asked = {m.pk: m for m in messages if m.role == Message.Role.USER}
    for message in asked.values():
        message.shown_attachments = []
    if asked:
        rows = Attachment.objects.filter(message_id__in=list(asked)).only(
            "id", "message_id", "name", "kind", "size"
        )
        for attachment in rows:
            asked[attachment.message_id].shown_attachments.append(attachment)  # type: ignore[index, union-attr]
    return messages


def link_as_a_line(conversation_id: uuid.UUID) -> int | None:
    """Give a conversation written as a plain list its tree: each message follows the one
    before. The last message's id (None for an empty conversation), now its current leaf."""
    previous = None
    for pk in (
        Message.objects.filter(conversation_id=conversation_id)
        .order_by("created_at", "id")
        .values_list("pk", flat=True)
    ):
        if previous is not None:
            Message.objects.filter(pk=pk).update(parent_id=previous)
        previous = pk
    if previous is not None:
        Conversation.objects.filter(pk=conversation_id).update(current_leaf_id=previous)
    return previous


def version_of(message: Message) -> Version:
    siblings = Message.objects.filter(
        conversation_id=message.conversation_id, parent_id=message.parent_id
    ).order_by("created_at", "id")
    return versions(siblings)[message.pk]


def newest_leaf_under(message: Message, children: dict[int, list[Message]]) -> Message:
    """Down from `message`, always to the newest version of the next turn."""
    while children.get(message.pk):
        message = max(children[message.pk], key=lambda m: (m.created_at, m.pk))
    return message


def branch_select(*, conversation: Conversation, message_id: int) -> None:
    """Show the branch through `message_id` (a version of some turn), and tell every tab.

    Refused while a reply is being written: its tabs would lose sight of it.
    """
    with transaction.atomic():
        locked = Conversation.objects.select_for_update().get(pk=conversation.pk)
        if Message.objects.filter(conversation=locked).active().exists():
            raise ReplyInProgress(
                _("Wait for the reply to finish, or stop it, to switch versions.")
            )
        if locked.current_leaf_id is None:
            link_as_a_line(locked.pk)  # a plain list: its messages follow each other first
        messages = list(Message.objects.filter(conversation=locked))
        chosen = next((m for m in messages if m.pk == message_id), None)
        if chosen is None:
            raise NotOnThisConversation(_("That message is not part of this conversation."))
        children: dict[int, list[Message]] = defaultdict(list)
        for message in messages:
            if message.parent_id is not None:
                children[message.parent_id].append(message)
        leaf = newest_leaf_under(chosen, children)
        Conversation.objects.filter(pk=locked.pk).update(current_leaf=leaf)
        group = locked.group_name
        transaction.on_commit(
            lambda: broadcast.to_group_from_sync(group, BranchChanged(message_id=leaf.pk))
        )


def branch_payloads(*, conversation: Conversation) -> list[MessagePayload]:
    """The branch shown now, as tabs show it: read afresh, as another tab may just have switched
    it (`conversation.current_leaf` is updated)."""
    conversation.refresh_from_db(fields=["current_leaf"])
    return [message_payload(message) for message in visible_branch(conversation)]
