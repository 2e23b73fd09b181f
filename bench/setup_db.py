"""Run in a subprocess with the server's environment: migrate, then make the bench user, a logged-in
session for it and its conversations. Prints {"session": key, "conversations": [ids]} as JSON on
the last line of stdout.

The session is made the way django.contrib.auth.login() makes one, without hashing a password
twice per server start (about a second each on a busy 2-core machine).
"""

from __future__ import annotations

import argparse
import json

import django


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--conversations", type=int, required=True)
    parser.add_argument("--username", required=True)
    args = parser.parse_args()

    django.setup()
    from django.contrib.auth import (
        BACKEND_SESSION_KEY,
        HASH_SESSION_KEY,
        SESSION_KEY,
        get_user_model,
    )
    from django.contrib.sessions.backends.db import SessionStore
    from django.core.management import call_command

    from conversations.models import Conversation

    call_command("migrate", verbosity=0, interactive=False)
    user, new = get_user_model().objects.get_or_create(username=args.username)
    if new:
        user.set_unusable_password()
        user.save()
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    # A clean slate: old conversations would only make the per-user queries slower run by run.
    Conversation.objects.filter(owner=user).delete()
    created = Conversation.objects.bulk_create(
        Conversation(owner=user, title=f"bench {i}") for i in range(args.conversations)
    )
    conversations = [str(c.id) for c in created]
    print(json.dumps({"session": session.session_key, "conversations": conversations}))


if __name__ == "__main__":
    main()
