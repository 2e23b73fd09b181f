"""Text that a database can store: the check for what users and clients send, and the repair
for what a model or an imported file writes."""


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
