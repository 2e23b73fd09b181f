"""`manage.py serve`: the production server, started only when the settings are fit for it.

It refuses, with what to change, a start that would be insecure or would not work across
processes: DEBUG on, a missing or short SECRET_KEY, no ALLOWED_HOSTS, several workers without
Redis (each process would have its own channel layer: a Stop from one tab would not reach a
reply in another process), or SQLite (one writer at a time) unless told it is meant. Then it
replaces itself with uvicorn: `--workers` processes, uvloop and httptools, the websockets
library, and the proxy's headers believed only from the addresses in --forwarded-allow-ips.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any

from django.conf import settings
from django.core.checks.security.base import SECRET_KEY_MIN_LENGTH, check_secret_key
from django.core.management.base import BaseCommand, CommandError, CommandParser

# The development key settings.py falls back to with DEBUG on.
DEVELOPMENT_KEY_PREFIX = "insecure"


def refusals(*, workers: int, allow_sqlite: bool) -> list[str]:
    """What is wrong for a production start; empty when nothing is."""
    found = []
    if settings.DEBUG:
        found.append("DEBUG is on: set DEBUG=0 (debug pages show settings and source to anyone).")
    # Django's own deployment check of the key (its length, its variety, its prefix).
    if check_secret_key(None) or str(settings.SECRET_KEY).startswith(DEVELOPMENT_KEY_PREFIX):
        found.append(
            f"SECRET_KEY is missing or weak: export one of at least {SECRET_KEY_MIN_LENGTH} "
            "random characters (python -c 'import secrets; print(secrets.token_urlsafe(50))')."
        )
    if not settings.ALLOWED_HOSTS or "*" in settings.ALLOWED_HOSTS:
        found.append("ALLOWED_HOSTS is empty or '*': set it to the site's host names.")
    if workers > 1 and not settings.REDIS_URL:
        found.append(
            f"{workers} workers need REDIS_URL: without it each process has a channel layer of "
            "its own, and a Stop or a second tab in another process never reaches a reply."
        )
    sqlite = settings.DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3"
    if sqlite and not allow_sqlite:
        found.append(
            "The database is SQLite (one writer at a time): set DATABASE_URL to PostgreSQL, or "
            "pass --allow-sqlite for a one-person site."
        )
    return found


class Command(BaseCommand):
    help = "Serve chatsite in production (uvicorn), once the settings are fit for it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=os.environ.get("HOST", "0.0.0.0"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument(
            "--workers", type=int, default=int(os.environ.get("WEB_CONCURRENCY", "2"))
        )
        parser.add_argument(
            "--forwarded-allow-ips",
            default=os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1"),
            help="the proxies whose X-Forwarded-* headers are believed (uvicorn's option)",
        )
        parser.add_argument("--allow-sqlite", action="store_true")
        parser.add_argument(
            "--check", action="store_true", help="only check the settings, and say what is wrong"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        workers = options["workers"]
        if workers < 1:
            raise CommandError("--workers must be at least 1.")
        wrong = refusals(workers=workers, allow_sqlite=options["allow_sqlite"])
        if wrong:
            raise CommandError("Refusing to serve:\n" + "\n".join(f"- {line}" for line in wrong))
        if options["check"]:
            self.stdout.write("The settings are fit for a production start.")
            return
        uvicorn = shutil.which("uvicorn", path=os.path.dirname(sys.executable)) or "uvicorn"
        command = [
            uvicorn,
            "chatsite.asgi:application",
            "--host", options["host"],
            "--port", str(options["port"]),
            "--workers", str(workers),
            "--loop", "uvloop",
            "--http", "httptools",
            "--ws", "websockets",
            "--lifespan", "off",
            "--proxy-headers",
            "--forwarded-allow-ips", options["forwarded_allow_ips"],
        ]  # fmt: skip
        self.stdout.write(f"Serving on {options['host']}:{options['port']} ({workers} workers)")
        self.stdout.flush()
        os.execv(uvicorn, command)
