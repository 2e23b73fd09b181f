"""Type aliases shared across chatsite's modules: who a user is, what an id is."""

import uuid
from typing import TypeAlias

from django.contrib.auth.models import AnonymousUser, User
from django.http import HttpRequest

__all__ = ["AnyUser", "AuthenticatedHttpRequest", "ConversationId", "MessageId", "User"]

# chatsite uses Django's own user model (AUTH_USER_MODEL is not set), and django-stubs types
# foreign keys to it and request.user with this concrete class: `User` is a signed-in user, an
# owner. (AbstractBaseUser would not do: `create(owner=...)` and `filter(owner=...)` expect User.)
# What request.user and a socket's scope["user"] hold: signed in or not.
AnyUser: TypeAlias = User | AnonymousUser

ConversationId: TypeAlias = uuid.UUID
MessageId: TypeAlias = int


class AuthenticatedHttpRequest(HttpRequest):
    """The request a @login_required view gets: its user is signed in (healthchecks' pattern)."""

    user: User
