"""Signing in with a directory's password (LDAP), for the accounts the directory owns.

django-auth-ldap, left to itself, signs a directory user into the local account of the same
username and then overwrites it: its name and email, its staff flag, and (with mirrored groups)
its groups. A local account that happens to share a username with someone in the directory,
an administrator's say, would be taken over by whoever holds that directory entry.

So this backend signs in only accounts that have no usable password and no single sign-on
identity: the ones it created (django-auth-ldap gives those an unusable password) or that an
administrator made without one for the directory to own. A username that belongs to a local account with a password is refused
here, before anything of that account is touched, and is left to the password backend. No
extra table is needed to tell the two apart; the cost is that setting a local password on a
directory account hands it back to local passwords.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django_auth_ldap.backend import LDAPBackend

from conversations.models import ExternalIdentity
from conversations.services import audit


class LdapBackend(LDAPBackend):  # type: ignore[misc]  # django-auth-ldap ships no types
    """django-auth-ldap's backend, for the active accounts the directory owns."""

    def authenticate(
        self, request: Any, username: str | None = None, password: str | None = None, **kwargs: Any
    ) -> Any:
        # LDAP off (CHAT_LDAP_URI unset): refuse without trying django-auth-ldap's default
        # server, ldap://localhost, should this backend be listed anyway.
        if not getattr(settings, "AUTH_LDAP_SERVER_URI", ""):
            return None
        # The audit log's rows of what it changes (mirrored groups, the staff flag) name it.
        with audit.acting_as("the directory (LDAP)"):
            return super().authenticate(request, username=username, password=password, **kwargs)

    def get_or_build_user(self, username: str, ldap_user: Any) -> tuple[Any, bool]:
        user, built = super().get_or_build_user(username, ldap_user)
        # Raised before django-auth-ldap populates or saves the account: it answers None, and
        # Django goes on to the next backend.
        if not built and user.has_usable_password():
            raise ldap_user.AuthenticationFailed(
                f"{username!r} is a local account with a password, not the directory's"
            )
        if not built and ExternalIdentity.objects.filter(user=user).exists():
            # Single sign-on's accounts have no password either: theirs is the provider's.
            raise ldap_user.AuthenticationFailed(f"{username!r} signs in through single sign-on")
        if not user.is_active:
            # As Django's ModelBackend: deactivated stays out, whatever the directory says.
            raise ldap_user.AuthenticationFailed(f"{username!r} is deactivated")
        return user, built

    def get_user(self, user_id: int) -> Any:
        # Django's ModelBackend answers None for a deactivated user, which ends their sessions
        # (pages, and sockets through conversations.services.sessions); django-auth-ldap's
        # does not check.
        user = super().get_user(user_id)
        if user is not None and not user.is_active:
            return None
        return user
