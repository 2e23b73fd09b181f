"""Run in a subprocess with the server's environment: migrate, then make the bench user, a logged-in
session for it, an API token and its conversations. Prints {"session": key, "conversations": [ids],
"token": key} as JSON on the last line of stdout.

The session is made the way django.contrib.auth.login() makes one, without hashing a password
twice per server start (about a second each on a busy 2-core machine).
"""

from __future__ import annotations

import argparse
import json

import django


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--conversations", type=int, default=1)
    parser.add_argument(
        "--users", type=int, default=0, help="that many users, one conversation each"
    )
    parser.add_argument("--username", required=True)
    args = parser.parse_args()

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    if args.users:
        # Many users with a conversation each: {"sessions": [keys], "conversations": [ids]}.
        made = [_user_with_session(f"{args.username}-{i}", 1) for i in range(args.users)]
        print(
            json.dumps({"sessions": [m[0] for m in made], "conversations": [m[1][0] for m in made]})
        )
        return
    session, conversations = _user_with_session(args.username, args.conversations)
    print(
        json.dumps(
            {"session": session, "conversations": conversations, "token": _token(args.username)}
        )
    )


def _token(username: str) -> str:
    """A personal API token of the user's, for the gateway's calls (/v1/)."""
    from django.contrib.auth import get_user_model

    from conversations.services.tokens import api_token_create

    return api_token_create(user=get_user_model().objects.get(username=username), name="bench")[1]


def _user_with_session(username: str, conversations: int) -> tuple[str, list[str]]:
    from django.contrib.auth import (
        BACKEND_SESSION_KEY,
        HASH_SESSION_KEY,
        SESSION_KEY,
        get_user_model,
    )
    from django.contrib.sessions.backends.db import SessionStore

    from conversations.models import Conversation
    from conversations.services import password_login

    user, new = get_user_model().objects.get_or_create(username=username)
    if new:
        user.set_unusable_password()
        user.save()
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = password_login.BACKEND
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    # A clean slate: old conversations would only make the per-user queries slower run by run.
    Conversation.objects.filter(owner=user).delete()
    created = Conversation.objects.bulk_create(
        Conversation(owner=user, title=f"bench {i}") for i in range(conversations)
    )
    assert session.session_key is not None
    return session.session_key, [str(c.id) for c in created]


if __name__ == "__main__":
    main()
