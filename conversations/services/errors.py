"""Why a send or a cancel was refused; each has a code the socket's error event carries."""

from datetime import datetime


class SessionEnded(Exception):
    """The socket's session no longer signs its user in: it acts on nothing more and closes."""


class SendRefused(Exception):
    """A send that starts nothing; the message is shown to the user who sent it."""

    code = "refused"


class ReplyInProgress(SendRefused):
    code = "reply_in_progress"


class DuplicateSend(SendRefused):
    code = "duplicate"


class NothingToCancel(SendRefused):
    code = "nothing_to_cancel"


class RateLimited(SendRefused):
    code = "rate_limited"

    def __init__(self, message: str, *, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after  # seconds, where waiting is the cure


class TooManyActive(RateLimited):
    """Its own code, because the cure differs: finish or stop a reply instead of waiting."""

    code = "too_many_active"


class BudgetExhausted(RateLimited):
    """The user's tokens for the day or the month are used: nothing starts until `resets_at`."""

    code = "budget_exhausted"

    def __init__(self, message: str, *, retry_after: int, resets_at: datetime) -> None:
        super().__init__(message, retry_after=retry_after)
        self.resets_at = resets_at


class TooManyConversations(RateLimited):
    """Refuses a new conversation (a page or API request, not a send)."""

    code = "too_many_conversations"


class ConversationGone(SendRefused):
    code = "conversation_deleted"


class NothingToRedo(SendRefused):
    """Regenerate or Continue with no reply to act on (or one that cannot be continued)."""

    code = "nothing_to_redo"


class ModelUnavailable(SendRefused):
    """The model asked for does not exist, is disabled, or is not for this user."""

    code = "model_unavailable"


class EngineUnavailable(SendRefused):
    """The configured engine could not be built (a bad setting, a missing model file)."""

    code = "engine_unavailable"
