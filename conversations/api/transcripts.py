"""A conversation's shown branch as Markdown or plain text: each message with its files, its tool
calls and, for a reply that did not finish, why."""

from __future__ import annotations

from datetime import datetime

from conversations.models import Conversation, Message
from conversations.services import branches
from conversations.services.text import size_in_words


def shown_branch(conversation: Conversation) -> list[Message]:
    """The branch the owner sees (from the prefetched messages), each with its version: the
    Markdown and text transcripts; the JSON ones hold every version."""
    return branches.shown(list(conversation.messages.all()), conversation.current_leaf_id)


def stop_note(message: Message) -> str:
    """Why a reply did not finish normally, in words; empty for a complete or user message."""
    if message.status == Message.Status.CANCELLED:
        who = (
            "after everyone left"
            if message.cancelled_by == "disconnect"
            else f"by {message.cancelled_by or 'someone'}"
        )
        tokens = message.completion_tokens or 0
        note = f"Stopped {who} after {tokens} token{'s' if tokens != 1 else ''}"
        if message.cancel_latency_ms is not None:
            note += f" (engine confirmed in {message.cancel_latency_ms:.0f} ms)"
        return note + "."
    if message.status == Message.Status.ERROR:
        return f"Failed: {message.error or 'the engine failed.'}"
    if message.status == Message.Status.INTERRUPTED:
        return "Interrupted: the server stopped while writing this reply."
    if message.is_active:
        return "Still being written when exported."
    return ""


def attachment_notes(message: Message) -> list[str]:
    """Each file the message was sent with, in a few words (from the prefetched attachments):
    its name, kind and size (the text is in the JSON export, the files in the zip)."""
    return [
        f"{attachment.name} ({attachment.get_kind_display()}, {size_in_words(attachment.size)})"
        for attachment in message.attachments.all()
    ]


def tool_notes(message: Message) -> list[str]:
    """An API caller's tool calls (an assistant message's) or the call a tool's result answers,
    in a few words each."""
    if message.tool_call_id:
        return [f"result of tool call {message.tool_call_id}"]
    return [
        f"called {call['function']['name']} ({call['id']}) with {call['function']['arguments']}"
        for call in message.tool_calls
    ]


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if value else "-"


def to_markdown(conversation: Conversation) -> str:
    lines = [
        f"# {conversation}",
        "",
        f"- Conversation: `{conversation.pk}`",
        f"- Owner: {conversation.owner.get_username()}",
        f"- Created: {_when(conversation.created_at)}",
        f"- Last activity: {_when(conversation.updated_at)}",
    ]
    for message in shown_branch(conversation):
        model = f"{message.model_slug}: " if message.model_slug else ""
        source = f" · {model}{message.engine}/{message.model}" if message.engine else ""
        version = (
            f" · version {message.version.index} of {message.version.count}"
            if message.version.count > 1
            else ""
        )
        heading = f"## {message.get_role_display()} · {_when(message.created_at)}{source}{version}"
        lines += ["", heading, ""]
        lines.append(message.content or "_(no text)_")
        if attached := attachment_notes(message):
            lines += ["", *(f"- Attached: {note}" for note in attached)]
        if tools := tool_notes(message):
            lines += ["", *(f"- Tool: {note}" for note in tools)]
        if note := stop_note(message):
            lines += ["", f"> **{message.get_status_display()}:** {note}"]
    return "\n".join(lines) + "\n"


def to_text(conversation: Conversation) -> str:
    lines = [
        str(conversation),
        f"Conversation {conversation.pk}, owner {conversation.owner.get_username()}, "
        f"created {_when(conversation.created_at)}",
    ]
    for message in shown_branch(conversation):
        lines += ["", f"[{message.role}] {_when(message.created_at)}", message.content]
        lines += [f"[attached: {note}]" for note in attachment_notes(message)]
        lines += [f"[tool: {note}]" for note in tool_notes(message)]
        if note := stop_note(message):
            lines.append(f"[{note}]")
    return "\n".join(lines) + "\n"
