"""Checks on text that users and clients send before it is written."""


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
