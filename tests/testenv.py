"""Loaded with -p before Django starts: the environment the test suite runs in."""

import os

# Tests run with DEBUG off, like production; they only need some secret.
os.environ.setdefault("SECRET_KEY", "tests-only-secret-key-not-for-production")
os.environ.setdefault("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")
# Tests open and drop their databases; connections kept alive across tests would block that.
os.environ.setdefault("DATABASE_CONN_MAX_AGE", "0")
