"""A message's content as OpenAI's Chat Completions API sends it: a string, or a list of parts.

Text parts are joined; a user message's `file` parts (a document, base64 in `file_data`) and
`image_url` parts (a data: URL) become the call's files, kept and read as the chat page's
attachments are (gateway.files). What this server cannot take is refused naming the part: a
`file_id` (there is no Files API here), an image by web address (this server fetches nothing),
audio.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

from conversations.gateway.errors import (
    INVALID_VALUE,
    UNSUPPORTED_CONTENT,
    UNSUPPORTED_PARAMETER,
    bad_request,
)
from conversations.services.text import storable

_DATA_URL = re.compile(
    r"data:(?P<type>[\w.+-]+/[\w.+-]+)?(?:;[\w=.+-]+)*;base64,(?P<data>.*)", re.S
)


@dataclass(frozen=True)
class CallFile:
    """A file a call's user message carries, decoded but not yet judged (gateway.files does)."""

    name: str
    data: bytes
    image: bool  # sent as an image_url part
    where: str  # the part, for a refusal: messages[2].content[1]


def content_of(
    raw: object, where: str, *, allow_null: bool, allow_files: bool
) -> tuple[str, tuple[CallFile, ...]]:
    """The message's text (its text parts joined) and its files."""
    if raw is None and allow_null:
        return "", ()
    if not isinstance(raw, list):
        return text_of(raw, where), ()
    texts: list[str] = []
    files: list[CallFile] = []
    for index, part in enumerate(raw):
        at = f"{where}[{index}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            texts.append(text_of(part.get("text"), f"{at}.text"))
        elif kind in ("file", "image_url") and allow_files:
            files.append(_file(part, at, index))
        elif kind in ("file", "image_url"):
            raise bad_request(
                "Files and images are taken in user messages only.", at, UNSUPPORTED_CONTENT
            )
        else:
            raise bad_request(
                "Content parts must be of type text, file or image_url.",
                f"{at}.type",
                UNSUPPORTED_CONTENT,
            )
    return "".join(texts), tuple(files)


def text_of(raw: object, where: str) -> str:
    if not isinstance(raw, str):
        raise bad_request(f"{where} must be text.", where, INVALID_VALUE)
    if not storable(raw):
        raise bad_request(
            f"{where} contains characters that cannot be saved.", where, INVALID_VALUE
        )
    return raw


def _file(part: dict[str, object], at: str, index: int) -> CallFile:
    if part["type"] == "image_url":
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, dict) else None
        if not isinstance(url, str) or not url.startswith("data:"):
            raise bad_request(
                "image_url.url must be a data: URL (base64): this server fetches nothing from "
                "the web.",
                f"{at}.image_url.url",
                UNSUPPORTED_CONTENT,
            )
        return CallFile(f"image-{index + 1}", _decoded(url, f"{at}.image_url.url"), True, at)
    file = part.get("file")
    if not isinstance(file, dict):
        raise bad_request(
            "file must be an object with file_data and filename.", f"{at}.file", INVALID_VALUE
        )
    if file.get("file_id") is not None:
        raise bad_request(
            "file_id needs a Files API, which this server does not have: send file_data.",
            f"{at}.file.file_id",
            UNSUPPORTED_PARAMETER,
        )
    data = file.get("file_data")
    if not isinstance(data, str):
        raise bad_request(
            "file.file_data must be the file, base64-encoded.",
            f"{at}.file.file_data",
            INVALID_VALUE,
        )
    name = file.get("filename")
    name = text_of(name, f"{at}.file.filename") if name is not None else f"file-{index + 1}"
    return CallFile(name, _decoded(data, f"{at}.file.file_data"), False, at)


def _decoded(data: str, where: str) -> bytes:
    """base64, bare or in a data: URL (OpenAI's clients send either)."""
    found = _DATA_URL.fullmatch(data) if data.startswith("data:") else None
    if data.startswith("data:") and found is None:
        raise bad_request("The data: URL must be base64-encoded.", where, INVALID_VALUE)
    try:
        return base64.b64decode(found["data"] if found else data, validate=True)
    except (binascii.Error, ValueError):
        raise bad_request("The file is not valid base64.", where, INVALID_VALUE) from None
