"""chatsite settings: everything a deployment changes comes from the environment (see .env.example)."""

from datetime import timedelta
from pathlib import Path

import dj_database_url
import django_stubs_ext
from csp.constants import NONE, SELF, UNSAFE_INLINE
from django.core.exceptions import ImproperlyConfigured

from chatsite.env import env_bool, env_float, env_int, env_json_object, env_list, env_str

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
    "conversations",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Content-Security-Policy and Permissions-Policy headers on every response (see below).
    "csp.middleware.CSPMiddleware",
    "django_permissions_policy.PermissionsPolicyMiddleware",
    # Serves collectstatic's output itself, so DEBUG=0 needs no separate file server.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
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
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------------------

# No persistent connections (CONN_MAX_AGE 0), as Django advises under ASGI: a kept connection
# belongs to the thread that opened it, and the threads that run sync code come and go, so kept
# connections pile up until the server refuses more. Each request (and each database_sync_to_async
# call) takes a connection and gives it back: on PostgreSQL to psycopg's pool, whose connections
# stay open between requests; on SQLite, which opens a file, it simply closes it.
if env_str("DATABASE_CONN_MAX_AGE"):
    raise ImproperlyConfigured(
        "DATABASE_CONN_MAX_AGE is no longer supported: under ASGI persistent connections leak "
        "(one per worker thread), so chatsite uses a connection per request, from psycopg's pool "
        "on PostgreSQL. Unset it, and size the pool with DATABASE_POOL_MIN_SIZE and "
        "DATABASE_POOL_MAX_SIZE instead."
    )
DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
        conn_max_age=0,  # the pool refuses anything else
        conn_health_checks=True,  # with the pool: a connection is checked before it is handed out
    )
}
_db_options = DATABASES["default"].setdefault("OPTIONS", {})
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    _pool_min = env_int("DATABASE_POOL_MIN_SIZE", 2, minimum=0)
    _pool_max = env_int("DATABASE_POOL_MAX_SIZE", 20, minimum=1)
    if _pool_max < _pool_min:
        raise ImproperlyConfigured(
            f"DATABASE_POOL_MAX_SIZE ({_pool_max}) must be at least "
            f"DATABASE_POOL_MIN_SIZE ({_pool_min})."
        )
    # One pool per process: keep processes x DATABASE_POOL_MAX_SIZE under the server's
    # max_connections. A request waits DATABASE_POOL_TIMEOUT seconds for a free one, then fails.
    _db_options["pool"] = {
        "min_size": _pool_min,
        "max_size": _pool_max,
        "timeout": env_float("DATABASE_POOL_TIMEOUT", 10.0, minimum=0.1),
    }
elif DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Generations write from worker threads while pages read and other users write. A deferred
    # transaction that has read cannot wait for the write lock: SQLite answers "database is
    # locked" at once. IMMEDIATE takes the lock at BEGIN, where the busy timeout (seconds) waits;
    # WAL lets pages read while a write is under way.
    _db_options["timeout"] = env_float("SQLITE_BUSY_TIMEOUT_S", 20.0, minimum=0.1)
    _db_options["transaction_mode"] = "IMMEDIATE"
    _db_options["init_command"] = "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"

REDIS_URL = env_str("REDIS_URL")
# "redis": channels-redis's list layer, which holds messages for a moment and drops them over
# CHANNEL_LAYER_CAPACITY; "pubsub": its pub/sub layer, which does less work per message.
CHANNEL_LAYER_BACKENDS = {
    "redis": "channels_redis.core.RedisChannelLayer",
    "pubsub": "channels_redis.pubsub.RedisPubSubChannelLayer",
}
# pubsub by default, by measurement: 50 streams at 20 tokens/s on two processes cost 1.5 CPU s per
# 1,000 tokens with p99 gaps of 51 ms on it, 5.8 s and 404 ms on the list layer (`make bench`).
CHANNEL_LAYER_BACKEND = env_str("CHANNEL_LAYER_BACKEND", "pubsub")
if CHANNEL_LAYER_BACKEND not in CHANNEL_LAYER_BACKENDS:
    raise ImproperlyConfigured(
        f"CHANNEL_LAYER_BACKEND must be one of {', '.join(CHANNEL_LAYER_BACKENDS)}; "
        f"got {CHANNEL_LAYER_BACKEND!r}."
    )
if REDIS_URL and CHANNEL_LAYER_BACKEND == "pubsub":
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": CHANNEL_LAYER_BACKENDS["pubsub"],
            "CONFIG": {"hosts": [{"address": REDIS_URL}]},
        }
    }
elif REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": CHANNEL_LAYER_BACKENDS["redis"],
            "CONFIG": {
                # redis-py 8 gives up on a read after 5 s, exactly as long as channels-redis blocks
                # in BZPOPMIN, so under load the two race and the socket dies with 1011; and its
                # pool refuses (not waits for) a 101st concurrent command, which a few hundred
                # streams per process reach.
                "hosts": [{"address": REDIS_URL, "socket_timeout": 30, "max_connections": 2000}],
                "capacity": env_int("CHANNEL_LAYER_CAPACITY", 1000, minimum=10),
                "expiry": 60,
            },
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# The per-user rate counters live here (conversations/services/ratelimits.py): in Redis, every
# process counts in one place; in this process's memory without it (one process only).
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            # Several deployments (or test servers) sharing one Redis keep their counts apart.
            "KEY_PREFIX": env_str("CACHE_KEY_PREFIX", "chatsite"),
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "conversation-list"
LOGOUT_REDIRECT_URL = "login"

# --- Login throttling (django-axes) -------------------------------------------------------------

# Axes' backend comes first: a locked-out login is refused before ModelBackend hashes the password.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
LOGIN_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5, minimum=1)
LOGIN_COOLOFF_MINUTES = env_int("LOGIN_COOLOFF_MINUTES", 15, minimum=1)
AXES_FAILURE_LIMIT = LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=LOGIN_COOLOFF_MINUTES)
# Either one locks: a username guessed at from many addresses, or one address trying many names.
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = True
# The client is REMOTE_ADDR (axes reads no forwarded headers); behind a reverse proxy, run daphne
# with --proxy-headers so REMOTE_ADDR is the client's address from X-Forwarded-For.
AXES_LOCKOUT_CALLABLE = "chatsite.login_throttling.lockout_response"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STATICFILES_DIRS = [BASE_DIR / "static"]
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

# --- Chat ---------------------------------------------------------------------------------------

# The models users can chat with: a JSON list (or the path of a file holding one); see the
# README's "Models". Unset: one model, "default", made from CHAT_ENGINE and the settings below.
CHAT_MODELS = env_str("CHAT_MODELS")
CHAT_ENGINE = env_str("CHAT_ENGINE", "llamacpp")
CHAT_MODEL_NAME = env_str("CHAT_MODEL_NAME")  # the name users see; empty: from the model file
# After a conversation's first reply its model writes the title (a short request of its own).
CHAT_AUTO_TITLES = env_bool("CHAT_AUTO_TITLES", True)
CHAT_SYSTEM_PROMPT = env_str("CHAT_SYSTEM_PROMPT", "You are a helpful assistant.")
CHAT_MAX_TOKENS = env_int("CHAT_MAX_TOKENS", 512, minimum=1)
CHAT_TEMPERATURE = env_float("CHAT_TEMPERATURE", 0.7, minimum=0.0)
CHAT_MAX_PROMPT_CHARS = env_int("CHAT_MAX_PROMPT_CHARS", 8000, minimum=1)
# Later tokens of one reply are merged into at most one frame per this many milliseconds.
CHAT_COALESCE_MS = env_int("CHAT_COALESCE_MS", 30, minimum=0)
# Partial text is written to the database this often while a reply streams.
CHAT_FLUSH_INTERVAL_S = env_float("CHAT_FLUSH_INTERVAL_S", 1.0, minimum=0.05)
# Frames one socket may send: a sustained rate and a burst. Over it a frame is answered
# `slow_down`; a burst's worth of refused frames in a row closes the socket (4008).
CHAT_SOCKET_FRAMES_PER_SECOND = env_float("CHAT_SOCKET_FRAMES_PER_SECOND", 2.0, minimum=0.1)
CHAT_SOCKET_FRAME_BURST = env_int("CHAT_SOCKET_FRAME_BURST", 10, minimum=1)
# The same for all of one user's sockets together, in each process.
CHAT_USER_FRAMES_PER_SECOND = env_float("CHAT_USER_FRAMES_PER_SECOND", 4.0, minimum=0.1)
CHAT_USER_FRAME_BURST = env_int("CHAT_USER_FRAME_BURST", 20, minimum=1)
# Frames one socket has accepted but not yet acted on (each waits for the database); a frame
# beyond these is answered `busy` rather than queued, so a socket's backlog stays bounded.
CHAT_SOCKET_QUEUED_FRAMES = env_int("CHAT_SOCKET_QUEUED_FRAMES", 4, minimum=1)
# Threads that save sends, beside Channels' one database thread, so a crowd of sends waits for
# PostgreSQL side by side rather than one after another behind other replies' writes. SQLite
# takes one writer at a time: there, sends use the database thread (0).
_SQLITE = DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3"
CHAT_SEND_THREADS = env_int("CHAT_SEND_THREADS", 0 if _SQLITE else 4, minimum=0)
if not _SQLITE and DATABASES["default"]["OPTIONS"]["pool"]["max_size"] <= CHAT_SEND_THREADS:
    raise ImproperlyConfigured(
        f"CHAT_SEND_THREADS ({CHAT_SEND_THREADS}) must be under DATABASE_POOL_MAX_SIZE: the "
        "database thread and requests need connections too."
    )
# Sockets one user may hold open at once, across every process (counted in CACHES).
CHAT_SOCKETS_PER_USER = env_int("CHAT_SOCKETS_PER_USER", 30, minimum=1)
# Sockets one browser session may open a minute (page loads and reconnects; counted in CACHES).
# Each open costs the process several queries; `make bench`'s flood scenario chose this default.
CHAT_SOCKET_OPENS_PER_MINUTE = env_int("CHAT_SOCKET_OPENS_PER_MINUTE", 30, minimum=1)
# A reply's final save is retried this long while the database is unavailable.
CHAT_FINAL_SAVE_RETRY_S = env_float("CHAT_FINAL_SAVE_RETRY_S", 300.0, minimum=0.0)
# A generation that produces no token for this long ends with an error.
CHAT_STALL_TIMEOUT_S = env_float("CHAT_STALL_TIMEOUT_S", 120.0, minimum=0.1)

CHAT_SCRIPTED_TOKENS = env_int("CHAT_SCRIPTED_TOKENS", 40, minimum=0)
CHAT_SCRIPTED_DELAY_MS = env_float("CHAT_SCRIPTED_DELAY_MS", 20.0, minimum=0.0)

CHAT_MODEL_PATH = env_str("CHAT_MODEL_PATH")
CHAT_CONTEXT_TOKENS = env_int("CHAT_CONTEXT_TOKENS", 2048, minimum=256)
CHAT_LLAMA_THREADS = env_int("CHAT_LLAMA_THREADS", 0, minimum=0)
# The embedded engine's llama.cpp binding: "xllamacpp" or "llama-cpp-python"; empty: the one installed.
CHAT_LLAMA_BINDING = env_str("CHAT_LLAMA_BINDING")

# CHAT_ENGINE=openai: any OpenAI-compatible server (`vllm serve`, llama.cpp's server, ...).
CHAT_OPENAI_BASE_URL = env_str("CHAT_OPENAI_BASE_URL", "http://127.0.0.1:8001/v1")
CHAT_OPENAI_API_KEY = env_str("CHAT_OPENAI_API_KEY")
CHAT_OPENAI_MODEL = env_str("CHAT_OPENAI_MODEL")  # empty: the first model the server lists
# Seconds to connect, and the longest silence allowed between two chunks of a reply.
CHAT_OPENAI_TIMEOUT = env_float("CHAT_OPENAI_TIMEOUT", 60.0, minimum=0.1)

# CHAT_ENGINE=vllm: vLLM inside the web process (needs `pip install .[vllm]` and a GPU).
CHAT_VLLM_MODEL = env_str("CHAT_VLLM_MODEL")
CHAT_VLLM_TENSOR_PARALLEL_SIZE = env_int("CHAT_VLLM_TENSOR_PARALLEL_SIZE", 1, minimum=1)
CHAT_VLLM_MAX_MODEL_LEN = env_int("CHAT_VLLM_MAX_MODEL_LEN", 4096, minimum=256)
CHAT_VLLM_GPU_MEMORY_UTILIZATION = env_float("CHAT_VLLM_GPU_MEMORY_UTILIZATION", 0.9, minimum=0.05)
# Skip CUDA graph capture: the engine starts in seconds instead of minutes (on CPU: 37 s, not
# 170-450 s), at some cost in tokens a second on a GPU.
CHAT_VLLM_ENFORCE_EAGER = env_bool("CHAT_VLLM_ENFORCE_EAGER", False)
CHAT_VLLM_LOG_REQUESTS = env_bool("CHAT_VLLM_LOG_REQUESTS", False)  # vLLM logs every request
# Any other AsyncEngineArgs, as a JSON object (e.g. {"dtype": "bfloat16", "seed": 0}).
CHAT_VLLM_ENGINE_ARGS = env_json_object("CHAT_VLLM_ENGINE_ARGS")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {"django.channels.server": {"level": "WARNING"}},
}

# A reply nobody has watched for this long (all its tabs closed) is stopped.
CHAT_DISCONNECT_GRACE_S = env_float("CHAT_DISCONNECT_GRACE_S", 30.0, minimum=0.1)
# An active reply whose heartbeat is older than this is marked interrupted (its process died).
CHAT_HEARTBEAT_TIMEOUT_S = env_float("CHAT_HEARTBEAT_TIMEOUT_S", 10.0, minimum=1.0)
if CHAT_HEARTBEAT_TIMEOUT_S < 3 * CHAT_FLUSH_INTERVAL_S:
    # A heartbeat refreshed less often than this would get live replies marked interrupted.
    raise ImproperlyConfigured(
        f"CHAT_HEARTBEAT_TIMEOUT_S ({CHAT_HEARTBEAT_TIMEOUT_S:g}) must be at least three times "
        f"CHAT_FLUSH_INTERVAL_S ({CHAT_FLUSH_INTERVAL_S:g})."
    )
# Per-user limits: replies being written at once, messages sent and conversations started per
# minute (the rates are counted in CACHES, so deleting conversations does not reset them).
CHAT_MAX_ACTIVE_PER_USER = env_int("CHAT_MAX_ACTIVE_PER_USER", 3, minimum=1)
CHAT_SENDS_PER_MINUTE = env_int("CHAT_SENDS_PER_MINUTE", 20, minimum=1)
CHAT_CONVERSATIONS_PER_MINUTE = env_int("CHAT_CONVERSATIONS_PER_MINUTE", 10, minimum=1)
# The OpenAI-compatible gateway (/v1/) keeps each call as a conversation of its caller's; off, a
# call's conversation is deleted once its reply has ended (only the metrics stay).
CHAT_GATEWAY_RECORD = env_bool("CHAT_GATEWAY_RECORD", True)
# A Prometheus scraper sending "Authorization: Bearer <this>" may read /metrics (staff always can).
CHAT_METRICS_TOKEN = env_str("CHAT_METRICS_TOKEN")

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

# The OpenAPI schema and its docs page are for signed-in users unless this opens them to all.
CHAT_API_DOCS_PUBLIC = env_bool("CHAT_API_DOCS_PUBLIC", default=False)
# One response of /api/export.jsonl holds about this many bytes of conversations; the rest is
# one `Link: rel="next"` away. Bounds what a slow reader keeps in the server's memory.
CHAT_EXPORT_PAGE_BYTES = env_int("CHAT_EXPORT_PAGE_BYTES", 4 * 1024 * 1024, minimum=1024)
# Share links (/s/<token>/) are readable by anyone with the link unless this asks for a login.
CHAT_SHARES_REQUIRE_LOGIN = env_bool("CHAT_SHARES_REQUIRE_LOGIN", default=False)
# Imports (the settings page, /api/imports/, manage.py import_history): the largest file taken,
# also what a zip's conversations file may inflate to; the JSON of one conversation (read into
# memory one at a time); conversations in one import; messages in one conversation; characters
# in one message. Uploads over 2.5 MB go to a temporary file (FILE_UPLOAD_MAX_MEMORY_SIZE).
CHAT_IMPORT_MAX_BYTES = env_int("CHAT_IMPORT_MAX_BYTES", 512 * 1024 * 1024, minimum=1024)
CHAT_IMPORT_MAX_CONVERSATION_BYTES = env_int(
    "CHAT_IMPORT_MAX_CONVERSATION_BYTES", 64 * 1024 * 1024, minimum=1024
)
CHAT_IMPORT_MAX_CONVERSATIONS = env_int("CHAT_IMPORT_MAX_CONVERSATIONS", 50_000, minimum=1)
CHAT_IMPORT_MAX_MESSAGES = env_int("CHAT_IMPORT_MAX_MESSAGES", 10_000, minimum=1)
CHAT_IMPORT_MAX_MESSAGE_CHARS = env_int("CHAT_IMPORT_MAX_MESSAGE_CHARS", 1_000_000, minimum=1)
# Imports one user may start in an hour (the page and the API; not manage.py import_history): each
# may parse hundreds of MB and write for minutes.
CHAT_IMPORTS_PER_HOUR = env_int("CHAT_IMPORTS_PER_HOUR", 10, minimum=1)
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
