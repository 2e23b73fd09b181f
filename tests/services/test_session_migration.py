"""Migration 0017: a session Django's ModelBackend signed in before the upgrade still signs its
person in after it (no one is signed out by replacing the backend)."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.sessions.backends.db import SessionStore
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client

from conversations.services.sessions import session_signs_in

BEFORE = ("conversations", "0016_external_identities")


@pytest.mark.django_db(transaction=True)
def test_a_session_from_before_the_upgrade_still_signs_in(alice: Any) -> None:
    executor = MigrationExecutor(connection)
    executor.migrate([BEFORE])
    old = SessionStore()
    old[SESSION_KEY] = str(alice.pk)
    old[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    old[HASH_SESSION_KEY] = alice.get_session_auth_hash()
    old.create()
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    assert session_signs_in(old.session_key, alice.pk)  # sockets
    client = Client()
    client.cookies[settings.SESSION_COOKIE_NAME] = old.session_key
    assert client.get("/").status_code == 200  # pages
