"""chatsite settings: everything a deployment changes comes from the environment (see .env.example).

Django's and the deployment's are here; the database, channel layer and cache are in
database_settings.py, and chatsite's own (CHAT_*) in chat_settings.py, both imported below.
"""

from datetime import timedelta
from pathlib import Path

import django_stubs_ext
from csp.constants import NONE, SELF, UNSAFE_INLINE
from django.core.exceptions import ImproperlyConfigured

from chatsite.env import env_bool, env_int, env_json_object, env_list, env_str

# Lets annotations such as admin.ModelAdmin[Conversation] run (django-stubs makes them generic).
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DEBUG", default=False)
SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY must be set when DEBUG is off. Set DEBUG=1 for local development, "
            "or export a long random SECRET_KEY."
        )
    SECRET_KEY = "insecure-development-key-only-used-with-debug-on"

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "corsheaders",
    "conversations",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # /v1/ only: every gateway response's x-request-id, preflights' included (so before CORS).
    "conversations.gateway.request_ids.request_id_middleware",
    # /v1/ only (CORS_URLS_REGEX): answers preflights before anything else can refuse them.
    "corsheaders.middleware.CorsMiddleware",
    # Content-Security-Policy and Permissions-Policy headers on every response (see below).
    "csp.middleware.CSPMiddleware",
    "django_permissions_policy.PermissionsPolicyMiddleware",
    # Serves collectstatic's output itself, so DEBUG=0 needs no separate file server.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The page's language: the language cookie (the top bar's menu sets it), else the browser's
    # Accept-Language, among LANGUAGES.
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # A signed-in person's chosen language, over the cookie and Accept-Language.
    "conversations.pages.languages.UserLanguageMiddleware",
    # The request being served, for the audit log's rows: who acted, from where.
    "conversations.services.audit.AuditContextMiddleware",
    # Each signed-in session's "last seen", for the account page.
    "conversations.pages.account.SeenMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: turns a refused login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "chatsite.urls"
ASGI_APPLICATION = "chatsite.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "django.template.context_processors.i18n",
                # The login page's other ways in: single sign-on, sign-up.
                "conversations.pages.sign_in_options.sign_in_options",
            ],
        },
    },
]

# --- Database, channel layer and cache (in database_settings.py) --------------------------------

from chatsite.database_settings import *  # noqa: E402, F403

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "conversation-list"
LOGOUT_REDIRECT_URL = "login"

# --- Sign-in: passwords, a directory (LDAP), single sign-on (OpenID Connect) --------------------

# django-auth-ldap's settings, from CHAT_LDAP_* (ldap_settings.py).
from chatsite.ldap_settings import *  # noqa: E402, F403
from chatsite.ldap_settings import LDAP_ENABLED  # noqa: E402

# mozilla-django-oidc's settings, from CHAT_OIDC_* (oidc_settings.py).
from chatsite.oidc_settings import *  # noqa: E402, F403
from chatsite.oidc_settings import OIDC_ENABLED  # noqa: E402

# Axes' backend comes first: a locked-out login is refused before ModelBackend hashes the password.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    # The directory's accounts (CHAT_LDAP_URI set); never a local account with a password.
    *(["conversations.services.ldap_login.LdapBackend"] if LDAP_ENABLED else []),
    # The identity provider's accounts (CHAT_OIDC_ISSUER set), found by issuer and subject.
    *(["conversations.services.oidc.OidcBackend"] if OIDC_ENABLED else []),
    # Django's ModelBackend, kept to superusers by CHAT_PASSWORD_LOGIN=0.
    "conversations.services.password_login.PasswordBackend",
]
# Local passwords: off (0) for everyone but superusers, when people sign in another way.
CHAT_PASSWORD_LOGIN = env_bool("CHAT_PASSWORD_LOGIN", True)
# Joining: staff's invitation links last this many days; CHAT_OPEN_SIGNUP=1 lets anyone sign up.
CHAT_INVITATION_DAYS = env_int("CHAT_INVITATION_DAYS", 7, minimum=1)
CHAT_OPEN_SIGNUP = env_bool("CHAT_OPEN_SIGNUP", False)
# Email, for password reset links: offered only with EMAIL_HOST set (an SMTP server).
EMAIL_HOST = env_str("EMAIL_HOST")
EMAIL_PORT = env_int("EMAIL_PORT", 587, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", True)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "chatsite@localhost")
CHAT_PASSWORD_RESET = bool(EMAIL_HOST)

# --- Login throttling (django-axes) -------------------------------------------------------------

LOGIN_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5, minimum=1)
LOGIN_COOLOFF_MINUTES = env_int("LOGIN_COOLOFF_MINUTES", 15, minimum=1)
AXES_FAILURE_LIMIT = LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=LOGIN_COOLOFF_MINUTES)
# Either one locks: a username guessed at from many addresses, or one address trying many names.
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "chatsite.login_throttling.lockout_response"
# The client's address behind a reverse proxy: X-Forwarded-For, as far as CHAT_TRUSTED_PROXY_COUNT says.
from chatsite.proxy_settings import *  # noqa: E402, F403

TIME_ZONE = "UTC"
USE_TZ = True
# The pages' languages and their catalogs (LANGUAGES, LOCALE_PATHS).
from chatsite.language_settings import *  # noqa: E402, F403

STATIC_URL = "static/"
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STATICFILES_DIRS = [BASE_DIR / "static"]
# Attachments are kept through Django's storage API: files under MEDIA_ROOT by default (served
# only through chatsite's own owner-checked view, never as MEDIA_URL), or any storage backend
# CHAT_FILE_STORAGE names ({"BACKEND": ..., "OPTIONS": {...}}, django-storages' for S3 and
# others: docs/deploy.md).
MEDIA_ROOT = Path(env_str("MEDIA_ROOT", str(BASE_DIR / "media")))
STORAGES = {
    "default": env_json_object("CHAT_FILE_STORAGE")
    or {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

SESSION_COOKIE_HTTPONLY = True
# Behind HTTPS: cookies only over TLS, and trust the proxy's X-Forwarded-Proto header.
# On by default with DEBUG off: a production deployment is served over HTTPS. SECURE_COOKIES=0
# turns it off for a plain-HTTP setup (a private network, a demo).
SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", default=not DEBUG)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
if SESSION_COOKIE_SECURE:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 60 * 60 * 24 * 365, minimum=0)

# --- Chat: chatsite's own settings, CHAT_* (in chat_settings.py) --------------------------------

from chatsite.chat_settings import *  # noqa: E402, F403

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {"django.channels.server": {"level": "WARNING"}},
}

# --- REST API -------------------------------------------------------------------------------------

REST_FRAMEWORK = {
    # Bearer first: its challenge makes an unauthenticated call a 401 rather than a 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "conversations.api.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
# --- Cross-origin calls to the gateway (django-cors-headers) -------------------------------------
# Pages on CHAT_GATEWAY_CORS_ORIGINS may call /v1/ with a token; no other route answers another
# origin, and no cookie is sent or read (the gateway takes tokens only).
CORS_URLS_REGEX = r"^/v1/"
CORS_ALLOWED_ORIGINS = CHAT_GATEWAY_CORS_ORIGINS  # noqa: F405 - from chat_settings
CORS_ALLOW_CREDENTIALS = False
CORS_ALLOW_METHODS = ("GET", "POST", "OPTIONS")
CORS_ALLOW_HEADERS = (
    "authorization",
    "content-type",
    "x-chatsite-conversation",
    "x-request-id",
    # What the openai SDKs send with every call from a browser: without them in the list the
    # browser refuses the call after its preflight.
    "x-stainless-arch",
    "x-stainless-async",
    "x-stainless-lang",
    "x-stainless-os",
    "x-stainless-package-version",
    "x-stainless-read-timeout",
    "x-stainless-retry-count",
    "x-stainless-runtime",
    "x-stainless-runtime-version",
    "x-stainless-timeout",
)
# Readable by the page's script: the call's conversation, and its id for a bug report.
CORS_EXPOSE_HEADERS = ("x-chatsite-conversation", "x-request-id")
CORS_PREFLIGHT_MAX_AGE = 600  # seconds a browser may keep a preflight's answer

# In every mode: scripts only from this server (no inline scripts or handlers), sockets and
# fetches only to it, no framing. Inline style attributes stay allowed (htmx adds its own).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, UNSAFE_INLINE],
        "img-src": [SELF, "data:"],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}
# Browser features chatsite never uses are off for it and anything it might embed.
PERMISSIONS_POLICY: dict[str, list[str]] = {
    feature: []
    for feature in (
        "camera",
        "microphone",
        "geolocation",
        "payment",
        "usb",
        "accelerometer",
        "gyroscope",
        "magnetometer",
    )
}

SPECTACULAR_SETTINGS = {
    "TITLE": "chatsite API",
    "DESCRIPTION": "Read, export and delete your conversations; chat through the "
    "OpenAI-compatible gateway under /v1/.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The docs page loads Swagger UI from this server (drf-spectacular-sidecar), never a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # The gateway's views are not DRF's: the hook adds their part (conversations.gateway.schema).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "conversations.gateway.schema.add_gateway",
    ],
}
