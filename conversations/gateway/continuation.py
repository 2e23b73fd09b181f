"""Which conversation a gateway call without X-Chatsite-Conversation goes on in.

A front end such as Open WebUI sends a chat's whole history with every turn. A call whose history
is a branch of a conversation its token's calls recorded, from the root down to a reply this
server wrote there, goes on in that conversation after that reply: the chat is one conversation
in the sidebar, not one per turn. A history that shares only its beginning with one (a message
edited in the front end) goes on from the last reply they share, as a new branch, as an edit in
the chat page does; a history that shares no reply with any (a first question, a client's own
few-shot examples sent with every call) starts a new conversation.

Finding that reply reads no conversation: each message a token's recorded calls write is keyed
by a digest of its path from the root (GatewayPath: the role, content and tool calls of every
message down to it, chained from a start of the token's own), so a call's candidates are its history's
prefixes that end at a reply, looked up in one indexed query however many conversations the
token has; the work is one pass of SHA-256 over the history, which the body limit bounds.
Content is compared without the whitespace around it: the new turn is stored stripped, and
clients trim what they send back.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from conversations.engines.base import ChatMessage
from conversations.models import ApiToken, GatewayPath, Message

PATH_START = "chatsite-gateway-path"


@dataclass(frozen=True)
class Match:
    """The reply a call's history ends at, or the last one it shares with the conversation."""

    conversation_id: uuid.UUID
    reply_id: int  # the new messages go on from it
    shared: int  # how many of the history's messages lead to it; the rest are new


def path_digests(token: ApiToken, history: Sequence[ChatMessage]) -> list[str]:
    """The digest of each beginning of `history`: [i] is that of history[: i + 1]."""
    digests = []
    digest = _start(token.pk)
    for message in history:
        calls = [call.openai() for call in message.tool_calls]
        digest = _step(digest, message.role, message.content, calls, message.tool_call_id)
        digests.append(digest)
    return digests


def find(
    *, token: ApiToken, history: Sequence[ChatMessage], digests: Sequence[str]
) -> Match | None:
    """The reply of this token's conversations the history goes on from (see above), or None.
    `digests`: path_digests(token, history)."""
    # The beginnings of the history that end at a reply, by their length.
    lengths = {
        digest: index + 1
        for index, (message, digest) in enumerate(zip(history, digests, strict=True))
        if message.role == Message.Role.ASSISTANT
    }
    if not lengths:
        return None
    paths = GatewayPath.objects.filter(
        digest__in=list(lengths),
        message__conversation__api_token=token,
        message__conversation__owner_id=token.user_id,
        # A reply this server wrote: the messages of a client's own history have no request id.
        message__role=Message.Role.ASSISTANT,
    ).exclude(message__request_id="")
    found = set(paths.values_list("digest", flat=True).distinct())
    if not found:
        return None
    longest = max(found, key=lengths.__getitem__)
    # The same branch twice (a question asked again, a reply alike in two conversations): the
    # newest, where the client most likely is.
    newest = (
        paths.filter(digest=longest)
        .order_by("-message_id")
        .values_list("message_id", "message__conversation_id")
        .first()
    )
    if newest is None:  # deleted since
        return None
    reply_id, conversation_id = newest
    return Match(conversation_id=conversation_id, reply_id=reply_id, shared=lengths[longest])


def remember_line(messages: Sequence[Message], digests: Sequence[str]) -> None:
    """Key the history messages a call saved by their paths (`digests`: path_digests' of them,
    as the request sent them)."""
    GatewayPath.objects.bulk_create(
        GatewayPath(message=message, digest=digest)
        for message, digest in zip(messages, digests, strict=True)
    )


def remember(message_id: int) -> None:
    """Key a message a call wrote (its new turn, its reply once saved) by its path: its
    parent's digest chained with its own role and content. Nothing for a message of a
    conversation no token's call started, or whose parent has no key (a turn added in the chat
    page): no call's history finds that branch."""
    message = (
        Message.objects.filter(pk=message_id, conversation__api_token__isnull=False)
        .values(
            "role",
            "content",
            "tool_calls",
            "tool_call_id",
            "parent_id",
            "conversation__api_token_id",
        )
        .first()
    )
    if message is None:
        return
    if message["parent_id"] is None:
        prior: str | None = _start(message["conversation__api_token_id"])
    else:
        parent = GatewayPath.objects.filter(message_id=message["parent_id"])
        prior = parent.values_list("digest", flat=True).first()
    if prior is None:
        return
    digest = _step(
        prior, message["role"], message["content"], message["tool_calls"], message["tool_call_id"]
    )
    # Ignoring a conflict: a reply remembered twice (its response and its ending) is one key.
    GatewayPath.objects.bulk_create(
        [GatewayPath(message_id=message_id, digest=digest)], ignore_conflicts=True
    )


def _start(token_id: int) -> str:
    """Where a token's paths start: the same history sent with two tokens has two digests."""
    return hashlib.sha256(f"{PATH_START}:{token_id}".encode()).hexdigest()


def _step(
    prior: str, role: str, content: str, tool_calls: list[dict[str, Any]], tool_call_id: str
) -> str:
    """A message's key from its parent's: its role, content, and its tool calls or the call its
    result answers (two histories that differ only there are two branches)."""
    calls = json.dumps(tool_calls, sort_keys=True, separators=(",", ":")) if tool_calls else ""
    parts = (prior, role, content.strip(), calls, tool_call_id)
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()
