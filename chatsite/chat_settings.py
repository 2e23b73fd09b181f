"""chatsite's own settings, the CHAT_* ones, grouped by concern (chatsite.settings imports them):
models and replies, sockets and per-user limits, each engine's, then the API, shares and imports."""

import re

from django.core.exceptions import ImproperlyConfigured

from chatsite.database_settings import DATABASES
from chatsite.env import env_bool, env_float, env_int, env_json_object, env_origins, env_str

# --- Models and replies ------------------------------------------------------------------------

# The models users can chat with: a JSON list (or the path of a file holding one); see
# docs/models-and-engines.md. Unset: one model, "default", made from CHAT_ENGINE and the
# settings below.
CHAT_MODELS = env_str("CHAT_MODELS")
CHAT_ENGINE = env_str("CHAT_ENGINE", "llamacpp")
CHAT_MODEL_NAME = env_str("CHAT_MODEL_NAME")  # the name users see; empty: from the model file
# Encrypts the API keys typed into the admin (a Fernet key: 32 url-safe base64-encoded bytes);
# empty: a key derived from SECRET_KEY.
CHAT_FIELD_ENCRYPTION_KEY = env_str("CHAT_FIELD_ENCRYPTION_KEY")
if CHAT_FIELD_ENCRYPTION_KEY:
    from cryptography.fernet import Fernet

    try:
        Fernet(CHAT_FIELD_ENCRYPTION_KEY)
    except ValueError:
        raise ImproperlyConfigured(
            "CHAT_FIELD_ENCRYPTION_KEY must be a Fernet key (32 url-safe base64-encoded bytes), "
            'such as the output of python -c "from cryptography.fernet import Fernet; '
            'print(Fernet.generate_key().decode())".'
        ) from None
# After a conversation's first reply the title model writes its title (a short request of its
# own); without one the title is the first words of the first message.
CHAT_AUTO_TITLES = env_bool("CHAT_AUTO_TITLES", True)
# The title model: a model's slug (CHAT_MODELS or an admin's row); empty: none. By default the
# one model of a single engine, except the embedded one: it writes one reply at a time, and
# SmolLM2's titles are worse than the first words.
CHAT_TITLE_MODEL = env_str(
    "CHAT_TITLE_MODEL", "" if CHAT_MODELS.strip() or CHAT_ENGINE == "llamacpp" else "default"
)
CHAT_SYSTEM_PROMPT = env_str("CHAT_SYSTEM_PROMPT", "You are a helpful assistant.")
CHAT_MAX_TOKENS = env_int("CHAT_MAX_TOKENS", 512, minimum=1)
CHAT_TEMPERATURE = env_float("CHAT_TEMPERATURE", 0.7, minimum=0.0)
CHAT_MAX_PROMPT_CHARS = env_int("CHAT_MAX_PROMPT_CHARS", 8000, minimum=1)
# A reply ends at this many characters: finish reason "length", saved complete, the engine told
# to stop. About 50,000 tokens, well past a model's default max_tokens_limit (4096); it bounds what
# a model that never stops costs in memory, in frames and in the row.
CHAT_MAX_REPLY_CHARS = env_int("CHAT_MAX_REPLY_CHARS", 200_000, minimum=1)
# Later tokens of one reply are merged into at most one frame per this many milliseconds.
CHAT_COALESCE_MS = env_int("CHAT_COALESCE_MS", 30, minimum=0)
# Partial text is written to the database this often while a reply streams.
CHAT_FLUSH_INTERVAL_S = env_float("CHAT_FLUSH_INTERVAL_S", 1.0, minimum=0.05)
# A reply's final save is retried this long while the database is unavailable.
CHAT_FINAL_SAVE_RETRY_S = env_float("CHAT_FINAL_SAVE_RETRY_S", 300.0, minimum=0.0)
# A generation that produces no token for this long ends with an error.
CHAT_STALL_TIMEOUT_S = env_float("CHAT_STALL_TIMEOUT_S", 120.0, minimum=0.1)
# A reply nobody has watched for this long (all its tabs closed) is stopped.
CHAT_DISCONNECT_GRACE_S = env_float("CHAT_DISCONNECT_GRACE_S", 30.0, minimum=0.1)
# A temporary chat is deleted this long after its last tab left or its last reply ended, if no
# tab is open on it by then: a reload, or a tab reopened at once, keeps it.
CHAT_TEMPORARY_GRACE_S = env_float("CHAT_TEMPORARY_GRACE_S", 10.0, minimum=0.0)
# An active reply whose heartbeat is older than this is marked interrupted (its process died).
CHAT_HEARTBEAT_TIMEOUT_S = env_float("CHAT_HEARTBEAT_TIMEOUT_S", 10.0, minimum=1.0)
if CHAT_HEARTBEAT_TIMEOUT_S < 3 * CHAT_FLUSH_INTERVAL_S:
    # A heartbeat refreshed less often than this would get live replies marked interrupted.
    raise ImproperlyConfigured(
        f"CHAT_HEARTBEAT_TIMEOUT_S ({CHAT_HEARTBEAT_TIMEOUT_S:g}) must be at least three times "
        f"CHAT_FLUSH_INTERVAL_S ({CHAT_FLUSH_INTERVAL_S:g})."
    )

# --- Sockets and per-user limits ---------------------------------------------------------------

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
# The largest frame a socket is sent, in bytes: under daphne's websocket_max_message_size (1 MiB),
# which ends the socket for a frame over it. A reply's text longer than this is sent in pieces; a
# saved message or branch that is is loaded over HTTP by the page (see docs/websocket-protocol.md).
CHAT_SOCKET_FRAME_BYTES = env_int("CHAT_SOCKET_FRAME_BYTES", 512 * 1024, minimum=16 * 1024)
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
# Per-user limits: replies being written at once, messages sent and conversations started per
# minute (the rates are counted in CACHES, so deleting conversations does not reset them).
CHAT_MAX_ACTIVE_PER_USER = env_int("CHAT_MAX_ACTIVE_PER_USER", 3, minimum=1)
CHAT_SENDS_PER_MINUTE = env_int("CHAT_SENDS_PER_MINUTE", 20, minimum=1)
CHAT_CONVERSATIONS_PER_MINUTE = env_int("CHAT_CONVERSATIONS_PER_MINUTE", 10, minimum=1)
# Token budgets (prompt and completion tokens of replies and titles), a day and a calendar month
# in TIME_ZONE, for whoever has no Budget of their own or of a group (the admin's); 0: no limit.
CHAT_TOKENS_PER_DAY = env_int("CHAT_TOKENS_PER_DAY", 0, minimum=0)
CHAT_TOKENS_PER_MONTH = env_int("CHAT_TOKENS_PER_MONTH", 0, minimum=0)

# --- Oversight ---------------------------------------------------------------------------------

# Whether staff with the view permission on conversations read their messages in the admin; off,
# only superusers do (staff still see titles, owners and metrics). Every view is in the audit log,
# and the owner's page lists the ones that showed the messages.
CHAT_STAFF_CAN_READ = env_bool("CHAT_STAFF_CAN_READ", True)
# Days the audit log keeps a row: `manage.py prune_audit` deletes older ones; 0 keeps them all.
CHAT_AUDIT_RETENTION_DAYS = env_int("CHAT_AUDIT_RETENTION_DAYS", 365, minimum=0)
# Days a conversation is kept after its last activity: `manage.py prune_conversations` deletes
# older ones (pinned ones and those in a project excepted). Empty: kept forever; 0 is refused, as
# it would mean every conversation.
CHAT_RETENTION_DAYS: int | None = env_int("CHAT_RETENTION_DAYS", 0, minimum=1) or None

# --- Engines -----------------------------------------------------------------------------------

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

# --- The API, the gateway, metrics, shares and imports -----------------------------------------

# The OpenAI-compatible gateway (/v1/) keeps each call as a conversation of its caller's; off, a
# call's conversation is deleted once its reply has ended (only the metrics stay).
CHAT_GATEWAY_RECORD = env_bool("CHAT_GATEWAY_RECORD", True)
# A call carrying this header (any non-empty value) is the client's own housekeeping (Open
# WebUI's title, tag and follow-up requests, once an operator marks them): answered, never kept.
# Empty: no header marks a call so.
CHAT_GATEWAY_HOUSEKEEPING_HEADER = env_str(
    "CHAT_GATEWAY_HOUSEKEEPING_HEADER", "X-Chatsite-Housekeeping"
).strip()
if not re.fullmatch(r"[A-Za-z0-9-]*", CHAT_GATEWAY_HOUSEKEEPING_HEADER):
    raise ImproperlyConfigured(
        "CHAT_GATEWAY_HOUSEKEEPING_HEADER must be an HTTP header name (letters, digits and "
        f"hyphens, such as X-Chatsite-Housekeeping); got {CHAT_GATEWAY_HOUSEKEEPING_HEADER!r}."
    )
# The largest body /v1/chat/completions takes: room for a message's files, base64-encoded (a
# third larger than the files); every other route keeps Django's DATA_UPLOAD_MAX_MEMORY_SIZE.
CHAT_GATEWAY_MAX_BODY_BYTES = env_int(
    "CHAT_GATEWAY_MAX_BODY_BYTES", 16 * 1024 * 1024, minimum=64 * 1024
)
# Web pages on these origins may call /v1/ from a browser (CORS, with their own API token);
# empty: none, as a browser's cross-origin call is refused unless the server allows it.
CHAT_GATEWAY_CORS_ORIGINS = env_origins("CHAT_GATEWAY_CORS_ORIGINS")
# A Prometheus scraper sending "Authorization: Bearer <this>" may read /metrics (staff always can).
CHAT_METRICS_TOKEN = env_str("CHAT_METRICS_TOKEN")
# The OpenAPI schema and its docs page are for signed-in users unless this opens them to all.
CHAT_API_DOCS_PUBLIC = env_bool("CHAT_API_DOCS_PUBLIC", default=False)
# One response of /api/export.jsonl holds about this many bytes of conversations; the rest is
# one `Link: rel="next"` away. Bounds what a slow reader keeps in the server's memory, and what
# building a page reads (a conversation over it comes alone on its page).
CHAT_EXPORT_PAGE_BYTES = env_int("CHAT_EXPORT_PAGE_BYTES", 4 * 1024 * 1024, minimum=1024)
# Share links (/s/<token>/) are readable by anyone with the link unless this asks for a login.
CHAT_SHARES_REQUIRE_LOGIN = env_bool("CHAT_SHARES_REQUIRE_LOGIN", default=False)
# Live (not revoked) share links one user may have; each holds a snapshot of a conversation.
CHAT_SHARES_PER_USER = env_int("CHAT_SHARES_PER_USER", 100, minimum=1)
# Attachments (docs/configuration.md#attachments): the largest file taken, what one message's
# files may add up to, and how many one message (or one gateway call) may carry. A file's text
# is read in a child process of its own, for at most CHAT_ATTACHMENT_EXTRACT_SECONDS of CPU and
# CHAT_ATTACHMENT_EXTRACT_MEMORY_MB of memory.
CHAT_ATTACHMENT_MAX_BYTES = env_int("CHAT_ATTACHMENT_MAX_BYTES", 10 * 1024 * 1024, minimum=1024)
CHAT_ATTACHMENT_MAX_MESSAGE_BYTES = env_int(
    "CHAT_ATTACHMENT_MAX_MESSAGE_BYTES", 25 * 1024 * 1024, minimum=1024
)
CHAT_ATTACHMENTS_PER_MESSAGE = env_int("CHAT_ATTACHMENTS_PER_MESSAGE", 10, minimum=1)
CHAT_ATTACHMENT_EXTRACT_SECONDS = env_int("CHAT_ATTACHMENT_EXTRACT_SECONDS", 15, minimum=1)
CHAT_ATTACHMENT_EXTRACT_MEMORY_MB = env_int("CHAT_ATTACHMENT_EXTRACT_MEMORY_MB", 512, minimum=64)
# Readers one process runs at once (each may take the memory above); more files wait their turn.
CHAT_ATTACHMENT_READERS = env_int("CHAT_ATTACHMENT_READERS", 2, minimum=1)
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
# Imports one process runs at once (one user runs one at a time, across every process): each holds
# many times its largest conversation's JSON in memory; more are refused, to try again shortly.
CHAT_IMPORTS_AT_ONCE = env_int("CHAT_IMPORTS_AT_ONCE", 2, minimum=1)
