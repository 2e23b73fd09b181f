"""Where chatsite keeps its data and passes its messages (chatsite.settings imports these): the
database (PostgreSQL with psycopg's pool, or SQLite), and Redis for the channel layer and the
cache, or this process's memory without it."""

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from chatsite.env import env_float, env_int, env_str

# Without DATABASE_URL: SQLite, in the repository's folder (settings.BASE_DIR).
_SQLITE_FILE = Path(__file__).resolve().parent.parent / "db.sqlite3"

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
        env_str("DATABASE_URL", f"sqlite:///{_SQLITE_FILE}"),
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
# With Redis, channels-redis's pub/sub layer, measured against its list layer (`make bench`): 50
# streams at 20 tokens/s on two processes cost 1.5 CPU s per 1,000 tokens with p99 gaps of 51 ms
# on it, 5.8 s and 404 ms on the list layer, which also drops frames once a process's channels
# hold its capacity (past about 50 streams a process: tabs stall, then resynchronize). The list
# layer is refused rather than kept as a second, slower way that loses frames.
CHANNEL_LAYER_BACKEND = env_str("CHANNEL_LAYER_BACKEND", "pubsub")
if CHANNEL_LAYER_BACKEND == "redis":
    raise ImproperlyConfigured(
        "CHANNEL_LAYER_BACKEND=redis (channels-redis's list layer) is not supported: it drops "
        "frames once a process's channels are full, and costs about four times the CPU per "
        "token. Use the pub/sub layer: CHANNEL_LAYER_BACKEND=pubsub, the default."
    )
if CHANNEL_LAYER_BACKEND != "pubsub":
    raise ImproperlyConfigured(
        f"CHANNEL_LAYER_BACKEND must be pubsub (the default); got {CHANNEL_LAYER_BACKEND!r}."
    )
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [{"address": REDIS_URL}]},
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
