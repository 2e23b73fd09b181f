"""Loaded with -p before Django starts: the environment the test suite runs in."""

import os

# Tests run with DEBUG off, like production; they only need some secret.
os.environ.setdefault("SECRET_KEY", "tests-only-secret-key-not-for-production")
os.environ.setdefault("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")
# A title request after each first reply would be one more engine request and one more event
# in every test; tests/generation/test_titles.py turns titles on.
os.environ.setdefault("CHAT_AUTO_TITLES", "0")
# No DATABASE_CONN_MAX_AGE: settings refuse it (connections are per request, pooled on
# PostgreSQL), and Django closes the pool before it drops the test database.
