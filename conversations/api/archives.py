"""A conversation as a zip: its JSON export and the files its messages were sent with."""

from __future__ import annotations

import shutil
import tempfile
import zipfile
from typing import IO

from django.http.response import HttpResponseBase
from django.utils.text import slugify

from conversations.api.exports import render
from conversations.attachments.downloads import file_download
from conversations.models import Conversation

ARCHIVE = "zip"  # the JSON export with the files its messages were sent with


def to_zip(conversation: Conversation) -> IO[bytes]:
    """`conversation.json` (the JSON export) and each attachment's file as it was sent, under
    `files/<attachment id>/<its name>`, in a temporary file (the files may be large)."""
    archive_file = tempfile.TemporaryFile()  # noqa: SIM115 - the response closes it
    with zipfile.ZipFile(archive_file, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("conversation.json", render([conversation], "json", many=False))
        for message in conversation.messages.all():
            for attachment in message.attachments.all():
                where = f"files/{attachment.pk}/{attachment.name}"
                try:
                    stored = attachment.file.open("rb")
                except OSError:  # gone from storage: said so, in the file's place
                    archive.writestr(f"{where}.missing", "This file is missing from storage.\n")
                    continue
                with stored, archive.open(where, "w", force_zip64=True) as packed:
                    shutil.copyfileobj(stored, packed)
    archive_file.seek(0)
    return archive_file


def download_zip(archive: IO[bytes], *, stem: str) -> HttpResponseBase:
    filename = f"{slugify(stem) or 'conversation'}.zip"
    return file_download(archive, filename=filename, content_type="application/zip")
