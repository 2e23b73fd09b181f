"""A reply being written, cut where its whole blocks end, and its last block made renderable.

The block being written is rendered as Markdown too, so that it looks as it will when it is
whole: an open code fence is already a code box (CommonMark runs an unclosed fence to the end),
a table whose delimiter row is not written yet is already a table, and `**bold` is already bold.
`as_finished` adds what the block still lacks; nothing it adds is ever shown as text, so the
block only grows as the reply goes on.
"""

import re

# A fence opens or closes a code block: three or more backticks or tildes, at most three spaces in.
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
# A table row (what a model writes: it starts with a pipe) and a delimiter row, perhaps partial.
_TABLE_ROW = re.compile(r" {0,3}\|")
_PARTIAL_DELIMITER_ROW = re.compile(r" {0,3}\|?[ :|-]*")
_DELIMITER_CELL = re.compile(r" *:?-+:? *")
# Emphasis, strikethrough and code-span markers, `$` (math, whose `*` and `_` are not emphasis)
# and backslash escapes, in the order they come.
_LONE_BLOCK_MARKER = re.compile(r"(?:^|\n) {0,3}(?:[-+*]|\d{1,9}[.)]|#{1,6}|>)$")
_INLINE_MARK = re.compile(r"\\.|`+|\*+|_+|~~|\$\$?")


def _fence_scan(text: str) -> tuple[int, str, int]:
    """Where the whole blocks of `text` end, and the fence of the code block left open there
    and where its line starts."""
    closed = 0
    fence = ""  # the fence of the open code block, if any
    opened_at = position = 0
    for line in text.splitlines(keepends=True):
        opened_at, position = (opened_at if fence else position), position + len(line)
        if not line.endswith("\n"):
            break  # the line being written
        opener = _FENCE.match(line)
        if fence:
            if (
                opener is not None
                and opener.group(1)[0] == fence[0]
                and len(opener.group(1)) >= len(fence)
                and not line[opener.end() :].strip()
            ):
                fence = ""
                closed = position
        elif opener:
            fence = opener.group(1)
        elif not line.strip():
            closed = position
    return closed, fence, opened_at


def closed_length(text: str) -> int:
    """How much of a reply being written is whole blocks: up to its last blank line outside a
    code block, or the end of its last closed code block. Those blocks are rendered as they will
    be at the end; the rest is still being written."""
    return _fence_scan(text)[0]


def as_finished(block: str) -> str:
    """The block being written (what follows `closed_length`) as it will read once whole."""
    _, fence, _ = _fence_scan(block)
    last_line = block.rsplit("\n", 1)[-1]
    if fence or _FENCE.match(last_line):
        return block  # code: shown as written, in its box
    return _complete_table(_close_inline(block))


def open_code(block: str) -> tuple[str, str, str] | None:
    """(what comes before it, its info string, its code so far) of the code block the block
    being written ends in, if its fence is not indented (markdown-it's content then is every
    line after the fence, as written)."""
    _, fence, opened_at = _fence_scan(block)
    if not fence or block[opened_at] == " ":
        return None
    opener_line, _, code = block[opened_at:].partition("\n")
    last_line = code.rsplit("\n", 1)[-1]
    if last_line and not last_line.lstrip(" ").strip(fence[0]):
        code = code[: -len(last_line)]  # its closing fence, being written: not a line of code
    code = code + "\n" if code and not code.endswith("\n") else code
    return block[:opened_at], opener_line.lstrip(fence[0]), code


def _cells(row: str) -> list[str]:
    row = row.strip()
    row = row[1:] if row.startswith("|") else row
    row = row[:-1] if row.endswith("|") and not row.endswith("\\|") else row
    return re.split(r"(?<!\\)\|", row)


def _complete_table(block: str) -> str:
    """A table whose header row is written but not yet all of its delimiter row gets the
    delimiter row it will have (alignment as far as it is typed), so it is a table already."""
    lines = block.split("\n")
    for index, line in enumerate(lines):
        if not _TABLE_ROW.match(line):
            continue
        delimiter = lines[index + 1] if index + 1 < len(lines) else ""
        if index + 2 < len(lines) or not _PARTIAL_DELIMITER_ROW.fullmatch(delimiter):
            return block  # a whole table (or not a table): markdown-it knows what it is
        typed = _cells(delimiter) if delimiter.strip() else []
        cells = [
            typed[i] if i < len(typed) and _DELIMITER_CELL.fullmatch(typed[i]) else "---"
            for i in range(len(_cells(line)))
        ]
        return "\n".join([*lines[:index], line, "|" + "|".join(cells) + "|"])
    return block


def _close_inline(block: str) -> str:
    """Close the link, emphasis, strikethrough and code span left open at the end of the block;
    a marker with nothing after it yet is left out (it would show as text, then vanish), and so
    is a line that is only a list item's, heading's or quote's marker so far."""
    text = _LONE_BLOCK_MARKER.sub("", block.rstrip())
    # A link whose address is being written: closed, so its text shows as a link already.
    if re.search(r"\]\([^)\s]*$", text):
        text += ")"
    opened: list[tuple[str, int]] = []  # (marker, where it starts)
    position = 0
    while match := _INLINE_MARK.search(text, position):
        mark, start, position = match.group(), match.start(), match.end()
        if mark.startswith("\\"):
            continue
        if mark[0] in "`$":
            # A code span or math ends at the same marker; inside it nothing is emphasis.
            end = text.find(mark, position)
            if mark[0] == "$" and end < 0:
                continue  # a lone dollar is text ("$5"); math that is not closed stays text
            if end < 0:
                if position == len(text):
                    return _close_inline(text[:start])
                opened.append((mark, start))
                break
            position = end + len(mark)
            continue
        before = text[start - 1] if start else " "
        after = text[position] if position < len(text) else " "
        # CommonMark's flanking rules, roughly: no emphasis next to a space, or in `snake_case`.
        can_open = not after.isspace() and not (mark[0] == "_" and before.isalnum())
        can_close = not before.isspace() and not (mark[0] == "_" and after.isalnum())
        if position == len(text) and not (can_close and any(m == mark for m, _ in opened)):
            return _close_inline(text[:start])  # "Hello **": the marker waits for its text
        if can_close and any(marker == mark for marker, _ in opened):
            while opened and opened.pop()[0] != mark:
                pass
        elif can_open:
            opened.append((mark, start))
    return text + "".join(marker for marker, _ in reversed(opened))
