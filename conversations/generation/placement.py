"""Where a turn's messages go in the conversation's tree (see services.branches)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from django.utils.translation import gettext as _

from conversations.models import Conversation, Message
from conversations.services import branches
from conversations.services.errors import NothingToRedo

NO_USER_MESSAGE = -1  # a turn that adds a reply only


@dataclass(frozen=True)
class Turn:
    """What a send asks for: a new message (`send`), another version of the last reply
    (`regenerate`; `retry` after a failure, which takes the failed version's place), a new
    version of one of the user's messages and a reply to it (`edit`), the last reply carried on
    from where it was cut off (`continue`), or a reply to the branch as it stands (`answer`: to
    the tool results an API caller saved).
    Each starts a reply under the same rules: one at a time per conversation, the same limits."""

    kind: str = "send"
    content: str = ""  # send, edit
    message_id: int | None = None  # edit: the user message it is a new version of
    # send, answer: the message it follows (the gateway's call continuing a branch); None: the
    # last of the branch shown
    after_id: int | None = None


@dataclass(frozen=True)
class Place:
    """Where a turn's messages go in the conversation's tree."""

    user_parent: int | None  # the user message's parent (NO_USER_MESSAGE: no user message)
    reply_parent: int | None = None  # without a user message: the reply's parent
    prefix: str = ""  # continue: the text the new reply starts from
    after: int | None = None  # the last message the tabs keep showing
    replaces: int | None = None  # retry: the failed reply the new one takes the place of

    @classmethod
    def reply_only(cls, parent: int | None, prefix: str = "") -> Place:
        return cls(NO_USER_MESSAGE, reply_parent=parent, prefix=prefix, after=parent)

    @property
    def has_user_message(self) -> bool:
        return self.user_parent != NO_USER_MESSAGE


def shown_leaf(chosen: Conversation) -> int | None:
    """The last message of the branch shown, `chosen` being the conversation's row as read for
    the send; a conversation written as a plain list is given its tree first."""
    if chosen.current_leaf_id is None:
        return branches.link_as_a_line(chosen.pk)  # messages written as a list
    return chosen.current_leaf_id


def place(conversation: Conversation, turn: Turn, leaf_id: int | None) -> Place:
    """Where `turn` puts its messages, the branch shown ending at `leaf_id`; a refusal the
    sender can read if it has nothing to work on."""
    if turn.kind == "send":
        if turn.after_id is None:
            return Place(user_parent=leaf_id, after=leaf_id)
        _check_on_this_conversation(conversation, turn.after_id)
        return Place(user_parent=turn.after_id, after=turn.after_id)
    if turn.kind == "answer":
        if turn.after_id is None:
            return Place.reply_only(leaf_id)
        _check_on_this_conversation(conversation, turn.after_id)
        return Place.reply_only(turn.after_id)
    if turn.kind == "edit":
        edited = Message.objects.filter(
            pk=turn.message_id or 0, conversation=conversation, role=Message.Role.USER
        ).first()
        if edited is None:
            raise branches.NotOnThisConversation(_("There is no such message of yours to edit."))
        return Place(user_parent=edited.parent_id, after=edited.parent_id)
    leaf = Message.objects.filter(pk=leaf_id).first() if leaf_id is not None else None
    if leaf is None:
        raise NothingToRedo(_("There is no reply to do again yet."))
    if turn.kind in ("regenerate", "retry"):
        parent = leaf.parent_id if leaf.role == Message.Role.ASSISTANT else leaf.pk
        where = Place.reply_only(parent)
        if turn.kind == "retry" and _failed_reply(leaf):
            # Retrying again and again leaves one failed version, not one more each time.
            return replace(where, replaces=leaf.pk)
        return where
    if turn.kind == "continue":
        if not leaf.can_continue:
            raise NothingToRedo(_("Only a reply that was cut off or stopped can be continued."))
        return Place.reply_only(leaf.parent_id, prefix=leaf.content)
    raise ValueError(f"unknown turn {turn.kind!r}")


def _failed_reply(message: Message) -> bool:
    """A reply that ended in an error and that nothing follows (no tool results, no answer)."""
    return (
        message.role == Message.Role.ASSISTANT
        and message.status == Message.Status.ERROR
        and not message.children.exists()
    )


def _check_on_this_conversation(conversation: Conversation, message_id: int) -> None:
    if not Message.objects.filter(pk=message_id, conversation=conversation).exists():
        raise branches.NotOnThisConversation(_("There is no such message to go on from."))
