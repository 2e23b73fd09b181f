"""Signing in with a directory's passwords (LDAP, through django-auth-ldap); chatsite.settings
imports these. CHAT_LDAP_URI unset: LDAP is off and nothing here touches the network or needs
django-auth-ldap installed.

The CHAT_LDAP_* variables are read once, here; ldap_settings() turns them into the AUTH_LDAP_*
settings django-auth-ldap reads, so the tests build the same settings for their own directory.
"""

from typing import Any

from django.core.exceptions import ImproperlyConfigured

from chatsite.env import env_bool, env_str

DEFAULT_USER_FILTER = "(uid=%(user)s)"
DEFAULT_GROUP_FILTER = "(objectClass=groupOfNames)"
# Django's user fields, from the directory's attributes (inetOrgPerson's names).
USER_ATTR_MAP = {"first_name": "givenName", "last_name": "sn", "email": "mail"}
# Seconds a login waits to reach the directory, and for any one answer: without them a
# directory that stops answering holds every login (and its worker thread) forever.
CONNECT_TIMEOUT_S = 5.0
ANSWER_TIMEOUT_S = 10.0


def ldap_settings(
    *,
    uri: str,
    bind_dn: str = "",
    bind_password: str = "",
    user_search_base: str = "",
    user_filter: str = DEFAULT_USER_FILTER,
    group_search_base: str = "",
    group_filter: str = DEFAULT_GROUP_FILTER,
    staff_group: str = "",
    mirror_groups: bool = True,
) -> dict[str, Any]:
    """django-auth-ldap's AUTH_LDAP_* settings for this directory.

    An empty `uri` turns LDAP off: the server URI is empty, which the backend
    (conversations.services.ldap_login) takes as "refuse everyone" rather than trying
    django-auth-ldap's default of ldap://localhost. Raises ImproperlyConfigured when the rest
    cannot work.
    """
    if not uri:
        return {"AUTH_LDAP_SERVER_URI": ""}
    _refuse_what_cannot_work(
        user_search_base=user_search_base,
        user_filter=user_filter,
        group_search_base=group_search_base,
        needs_groups=mirror_groups or bool(staff_group),
    )
    try:
        # Imported only with LDAP on: python-ldap is compiled against libldap, an optional extra.
        import ldap
        from django_auth_ldap.config import GroupOfNamesType, LDAPSearch
    except ImportError:
        raise ImproperlyConfigured(
            "CHAT_LDAP_URI is set but django-auth-ldap is not installed: pip install "
            "'chatsite[ldap]' (it builds python-ldap, which needs libldap2-dev and libsasl2-dev)."
        ) from None

    built: dict[str, Any] = {
        "AUTH_LDAP_SERVER_URI": uri,
        "AUTH_LDAP_BIND_DN": bind_dn,
        "AUTH_LDAP_BIND_PASSWORD": bind_password,
        "AUTH_LDAP_USER_SEARCH": LDAPSearch(user_search_base, ldap.SCOPE_SUBTREE, user_filter),
        "AUTH_LDAP_USER_ATTR_MAP": dict(USER_ATTR_MAP),
        # Names, email and the staff flag follow the directory at every login.
        "AUTH_LDAP_ALWAYS_UPDATE_USER": True,
        # Groups gate models here, not Django permissions: no permission lookups per request.
        "AUTH_LDAP_FIND_GROUP_PERMS": False,
        "AUTH_LDAP_MIRROR_GROUPS": mirror_groups,
        "AUTH_LDAP_CONNECTION_OPTIONS": {
            ldap.OPT_NETWORK_TIMEOUT: CONNECT_TIMEOUT_S,
            ldap.OPT_TIMEOUT: ANSWER_TIMEOUT_S,
        },
    }
    if group_search_base:
        built["AUTH_LDAP_GROUP_SEARCH"] = LDAPSearch(
            group_search_base, ldap.SCOPE_SUBTREE, group_filter
        )
        # A group's Django name is its cn: cn=team,ou=groups,... becomes the group "team".
        built["AUTH_LDAP_GROUP_TYPE"] = GroupOfNamesType(name_attr="cn")
    if staff_group:
        # Set at every login (ALWAYS_UPDATE_USER): leaving the group takes is_staff away.
        built["AUTH_LDAP_USER_FLAGS_BY_GROUP"] = {"is_staff": staff_group}
    return built


def _refuse_what_cannot_work(
    *, user_search_base: str, user_filter: str, group_search_base: str, needs_groups: bool
) -> None:
    """ImproperlyConfigured, with the fix, for a directory configuration that cannot work."""
    if not user_search_base:
        raise ImproperlyConfigured(
            "CHAT_LDAP_USER_SEARCH_BASE must be set with CHAT_LDAP_URI: the directory entry "
            "under which people are searched for, e.g. ou=people,dc=example,dc=org."
        )
    if "%(user)s" not in user_filter:
        raise ImproperlyConfigured(
            f"CHAT_LDAP_USER_FILTER must contain %(user)s, where the username goes; "
            f"got {user_filter!r}."
        )
    if needs_groups and not group_search_base:
        raise ImproperlyConfigured(
            "CHAT_LDAP_GROUP_SEARCH_BASE must be set to mirror the directory's groups or to "
            "use CHAT_LDAP_STAFF_GROUP; set it, or CHAT_LDAP_MIRROR_GROUPS=0 and no staff group."
        )


CHAT_LDAP_URI = env_str("CHAT_LDAP_URI")
LDAP_ENABLED = bool(CHAT_LDAP_URI)
CHAT_LDAP_BIND_DN = env_str("CHAT_LDAP_BIND_DN")
CHAT_LDAP_BIND_PASSWORD = env_str("CHAT_LDAP_BIND_PASSWORD")
CHAT_LDAP_USER_SEARCH_BASE = env_str("CHAT_LDAP_USER_SEARCH_BASE")
CHAT_LDAP_USER_FILTER = env_str("CHAT_LDAP_USER_FILTER", DEFAULT_USER_FILTER)
CHAT_LDAP_GROUP_SEARCH_BASE = env_str("CHAT_LDAP_GROUP_SEARCH_BASE")
CHAT_LDAP_GROUP_FILTER = env_str("CHAT_LDAP_GROUP_FILTER", DEFAULT_GROUP_FILTER)
CHAT_LDAP_STAFF_GROUP = env_str("CHAT_LDAP_STAFF_GROUP")
CHAT_LDAP_MIRROR_GROUPS = env_bool("CHAT_LDAP_MIRROR_GROUPS", True)

# The AUTH_LDAP_* names, as module globals for chatsite.settings' star import.
globals().update(
    ldap_settings(
        uri=CHAT_LDAP_URI,
        bind_dn=CHAT_LDAP_BIND_DN,
        bind_password=CHAT_LDAP_BIND_PASSWORD,
        user_search_base=CHAT_LDAP_USER_SEARCH_BASE,
        user_filter=CHAT_LDAP_USER_FILTER,
        group_search_base=CHAT_LDAP_GROUP_SEARCH_BASE,
        group_filter=CHAT_LDAP_GROUP_FILTER,
        staff_group=CHAT_LDAP_STAFF_GROUP,
        mirror_groups=CHAT_LDAP_MIRROR_GROUPS,
    )
)
