"""Secrets kept in the database (an upstream API key typed into the admin), encrypted at rest.

Fernet (the `cryptography` library's authenticated encryption) with a key from
CHAT_FIELD_ENCRYPTION_KEY, or else derived from SECRET_KEY: a copy of the database alone does not
give the keys away. Changing the key makes the stored secrets unreadable; they read as empty and
must be typed again (the admin says so).
"""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings


def _fernet() -> Fernet:
    configured = settings.CHAT_FIELD_ENCRYPTION_KEY
    if configured:
        return Fernet(configured)
    # A key of its own for this purpose, not SECRET_KEY itself (which also signs sessions).
    digest = hashlib.sha256(b"chatsite field encryption\0" + settings.SECRET_KEY.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def encrypt(secret: str) -> str:
    """The ciphertext to store for `secret` ("" for none)."""
    return _fernet().encrypt(secret.encode()).decode() if secret else ""


def decrypt(stored: str) -> str:
    """The secret behind `stored`; "" for none, or for one encrypted with another key."""
    if not stored:
        return ""
    try:
        return _fernet().decrypt(stored.encode()).decode()
    except InvalidToken:
        return ""
