"""A file's name as people see it (the message's list, the prompt, a download's name): the last
part of whatever path was sent, in NFC, without control, format (a right-to-left override that
turns "gnp.exe" into "exe.png"), private-use or unassigned characters or line breaks. Files are
stored under keys of their own, never under this name."""

from __future__ import annotations

import unicodedata

MAX_CHARS = 200
UNSHOWN = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}
FALLBACK = "attachment"


def shown_name(sent: str) -> str:
    name = unicodedata.normalize("NFC", sent).replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(char for char in name if unicodedata.category(char) not in UNSHOWN)
    return name.strip(" .")[:MAX_CHARS].strip(" ") or FALLBACK
