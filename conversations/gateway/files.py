"""A call's files read before its send, as the chat page's attachments are: judged from their
bytes, their text read in a child process within the reader's limits (the event loop waits on
it, never blocks), images only for a model with `vision`. Each refusal is a 400 naming the part.
They are stored with the call's messages (calls.call_save) and counted against the model's
context by the send, which refuses a message that would not fit.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from conversations.attachments import uploads
from conversations.attachments.kinds import Kind
from conversations.attachments.names import shown_name
from conversations.engines.specs import ModelSpec
from conversations.gateway.errors import INVALID_VALUE, TOO_MANY, bad_request
from conversations.gateway.parts import CallFile
from conversations.gateway.wire import ChatCall


@dataclass(frozen=True)
class ReadFile:
    name: str
    kind: Kind
    data: bytes
    text: str


@dataclass(frozen=True)
class ReadFiles:
    """The new turn's files, and each history message's (aligned with the call's history)."""

    turn: tuple[ReadFile, ...] = ()
    history: tuple[tuple[ReadFile, ...], ...] = ()


async def read_call_files(call: ChatCall, model: ModelSpec) -> ReadFiles:
    if not call.files and not any(call.history_files):
        return ReadFiles(history=tuple(() for _ in call.history))
    # Every file is a child process's reading: a call's files, in all its messages together,
    # are one message's worth.
    most = settings.CHAT_ATTACHMENTS_PER_MESSAGE
    every = [file for files in (*call.history_files, call.files) for file in files]
    if len(every) > most:
        raise bad_request(
            f"A call may carry {most} files at most, in all its messages.",
            every[most].where,
            TOO_MANY,
        )
    return ReadFiles(
        turn=await _read_all(call.files, model),
        history=tuple([await _read_all(files, model) for files in call.history_files]),
    )


async def _read_all(files: tuple[CallFile, ...], model: ModelSpec) -> tuple[ReadFile, ...]:
    return tuple([await _read(file, model) for file in files])


async def _read(file: CallFile, model: ModelSpec) -> ReadFile:
    name = shown_name(file.name)
    try:
        kind, text = await uploads.read(name, file.data, model)
    except uploads.AttachmentRefused as exc:
        raise bad_request(str(exc), file.where, exc.code) from None
    if kind.is_image != file.image:
        what = "an image" if kind.is_image else "not an image"
        raise bad_request(
            f"{name} is {what}: send it as a {'image_url' if kind.is_image else 'file'} part.",
            file.where,
            INVALID_VALUE,
        )
    return ReadFile(name, kind, file.data, text)
