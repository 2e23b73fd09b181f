"""Single sign-on with an OpenID Connect provider, through mozilla-django-oidc; chatsite.settings
imports these. CHAT_OIDC_ISSUER unset: single sign-on is off (OIDC_ENABLED False), its pages
answer 404, its backend refuses everyone, and nothing here touches the network.

The provider's endpoints are not settings: they come from its discovery document
(<issuer>/.well-known/openid-configuration), fetched at the first login and kept
(conversations.services.oidc), so only the issuer and the client are configured.
"""

from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from chatsite.env import env_list, env_str

CHAT_OIDC_ISSUER = env_str("CHAT_OIDC_ISSUER").strip().rstrip("/")
OIDC_ENABLED = bool(CHAT_OIDC_ISSUER)
# The confidential client registered for chatsite at the provider, with the redirect URI
# https://<this site>/oidc/callback/.
CHAT_OIDC_CLIENT_ID = env_str("CHAT_OIDC_CLIENT_ID")
CHAT_OIDC_CLIENT_SECRET = env_str("CHAT_OIDC_CLIENT_SECRET")
# The login page's button: "Sign in with <CHAT_OIDC_NAME>"; empty while single sign-on is off.
CHAT_OIDC_NAME = env_str("CHAT_OIDC_NAME", "SSO") if OIDC_ENABLED else ""
# The claim (a list of names, from the ID token or userinfo) whose values are Django groups.
CHAT_OIDC_GROUPS_CLAIM = env_str("CHAT_OIDC_GROUPS_CLAIM", "groups") or "groups"
# Any of these claim values makes the account staff; unset, is_staff is left to the admin.
CHAT_OIDC_STAFF_GROUPS = env_list("CHAT_OIDC_STAFF_GROUPS", [])
# "groups" is not asked for by default: many providers have no such scope and some refuse an
# unknown one. Where the groups claim needs a scope of its own (Okta, Dex, ...), add it here.
CHAT_OIDC_SCOPES = env_str("CHAT_OIDC_SCOPES", "openid email profile")

if OIDC_ENABLED:
    _issuer = urlsplit(CHAT_OIDC_ISSUER)
    if _issuer.scheme not in {"https", "http"} or not _issuer.hostname:
        raise ImproperlyConfigured(
            "CHAT_OIDC_ISSUER must be the provider's issuer URL, e.g. "
            f"https://id.example.com/realms/staff; got {CHAT_OIDC_ISSUER!r}."
        )
    if _issuer.scheme == "http" and _issuer.hostname not in {"127.0.0.1", "localhost", "::1"}:
        # The client secret and the tokens cross this connection.
        raise ImproperlyConfigured(
            "CHAT_OIDC_ISSUER must use https (plain http only to this machine); "
            f"got {CHAT_OIDC_ISSUER!r}."
        )
    if not CHAT_OIDC_CLIENT_ID or not CHAT_OIDC_CLIENT_SECRET:
        raise ImproperlyConfigured(
            "CHAT_OIDC_CLIENT_ID and CHAT_OIDC_CLIENT_SECRET must be set with CHAT_OIDC_ISSUER: "
            "the confidential client registered for chatsite at the provider."
        )
    if "openid" not in CHAT_OIDC_SCOPES.split():
        raise ImproperlyConfigured(
            f"CHAT_OIDC_SCOPES must include openid; got {CHAT_OIDC_SCOPES!r}."
        )

# --- mozilla-django-oidc's own names for them ----------------------------------------------------

OIDC_RP_CLIENT_ID = CHAT_OIDC_CLIENT_ID
OIDC_RP_CLIENT_SECRET = CHAT_OIDC_CLIENT_SECRET
OIDC_RP_SCOPES = CHAT_OIDC_SCOPES
# ID tokens signed with the provider's keys (its jwks_uri): OpenID Connect's default, RS256.
OIDC_RP_SIGN_ALGO = "RS256"
# state (always), nonce and PKCE: a callback is taken only for a login this browser began.
OIDC_USE_NONCE = True
OIDC_USE_PKCE = True
OIDC_PKCE_CODE_CHALLENGE_METHOD = "S256"
# client_secret_basic: the method every provider must accept.
OIDC_TOKEN_USE_BASIC_AUTH = True
# The tokens serve the login only: nothing keeps them, in the session or anywhere else.
OIDC_STORE_ACCESS_TOKEN = False
OIDC_STORE_ID_TOKEN = False
# Seconds a login waits for any one answer from the provider.
OIDC_TIMEOUT = 10
OIDC_VERIFY_SSL = True
# The views that find the provider's endpoints by discovery and send a failed login back to
# the login page (mozilla_django_oidc.urls reads these when it is imported).
OIDC_AUTHENTICATE_CLASS = "conversations.pages.oidc.AuthenticationRequestView"
OIDC_CALLBACK_CLASS = "conversations.pages.oidc.CallbackView"
