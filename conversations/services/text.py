"""Text that a database can store: the check for what users and clients send, and the repair
for what a model or an imported file writes; and a size in words, for refusals."""

from django.template.defaultfilters import filesizeformat


def size_in_words(size: int) -> str:
    """1.0 GB, 512.0 MB: Django's words, with a plain space (its own is non-breaking, for pages)."""
    return str(filesizeformat(size)).replace("\xa0", " ")


def storable(text: str) -> bool:
    """False for text a database refuses: PostgreSQL stores no NUL, UTF-8 no lone surrogate.

    JSON's \\u escapes can spell both, though a websocket text frame itself cannot carry them.
    """
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def make_storable(text: str) -> str:
    """The text as every database stores it, and as a tab shows it: without NUL (which shows as
    nothing), each lone surrogate replaced by U+FFFD (which a browser shows for one).

    For text nobody may refuse: a model's output, an imported file. What a user types is refused
    instead (see storable).
    """
    if storable(text):
        return text
    text = text.replace("\x00", "")
    # Through UTF-16, as a browser reads it: two surrogates that pair up make one character again.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


class StorableDeltas:
    """A stream's deltas made storable one by one, as make_storable would make their whole: a
    surrogate pair an engine split across two deltas (JSON's \\ud83d, then \\ude00) is held
    back until its second half comes, and is one character, not two U+FFFD."""

    def __init__(self) -> None:
        self._held = ""

    def feed(self, delta: str) -> str:
        # NUL goes first, as make_storable drops it: it may stand between a pair's halves.
        delta, self._held = (self._held + delta).replace("\x00", ""), ""
        if delta and "\ud800" <= delta[-1] <= "\udbff":  # a high surrogate: a pair's first half
            delta, self._held = delta[:-1], delta[-1]
        return make_storable(delta)

    def rest(self) -> str:
        """What is held back once the stream has ended: a lone half, as U+FFFD."""
        held, self._held = self._held, ""
        return make_storable(held)
