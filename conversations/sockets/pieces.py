"""Frames kept under the size a socket can be sent (CHAT_SOCKET_FRAME_BYTES).

Daphne ends a socket whose handler sends a frame over its websocket_max_message_size (1 MiB),
and a reply can be longer than that: 200,000 quotes are 1.2 MB once escaped. The renderers send
a long reply's text in pieces (a snapshot of its beginning, deltas for the rest) and a saved
message too long for one frame as a placeholder the page loads over HTTP.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

# The most bytes one character of text can take in a frame: `"` is `&quot;` in HTML, a control
# character `\u0001` in JSON; every other character is at most 4 bytes of UTF-8.
MOST_BYTES_PER_CHAR = 6
# Room for a frame's markup or fields around the text of a delta.
FRAME_OVERHEAD_BYTES = 1024


def fits(frame: str, frame_bytes: int) -> bool:
    # Characters first: a frame of fewer characters than the limit's sixth needs no encoding.
    return len(frame) * 4 <= frame_bytes or len(frame.encode()) <= frame_bytes


def delta_chars(frame_bytes: int) -> int:
    """The most characters of text one delta frame can carry, whatever they are."""
    return max(1, (frame_bytes - FRAME_OVERHEAD_BYTES) // MOST_BYTES_PER_CHAR)


def pieces(text: str, start: int, size: int) -> Iterator[tuple[int, str]]:
    """`text` from `start` in pieces of at most `size` characters, each with its offset."""
    for offset in range(start, len(text), size):
        yield offset, text[offset : offset + size]


def longest_head(text: str, frame_of: Callable[[str], str], frame_bytes: int) -> tuple[str, int]:
    """The frame `frame_of` makes of the longest beginning of `text` that fits (halving it until
    one does: rendered Markdown has no fixed size per character), and that beginning's length."""
    head = len(text)
    frame = frame_of(text)
    while head and not fits(frame, frame_bytes):
        head //= 2
        frame = frame_of(text[:head])
    return frame, head
