"""Why a send or a cancel was refused; each has a code the socket's error event carries."""


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


class TooManyActive(RateLimited):
    """Its own code, because the cure differs: finish or stop a reply instead of waiting."""

    code = "too_many_active"


class ConversationGone(SendRefused):
    code = "conversation_deleted"


class EngineUnavailable(SendRefused):
    """The configured engine could not be built (a bad setting, a missing model file)."""

    code = "engine_unavailable"
