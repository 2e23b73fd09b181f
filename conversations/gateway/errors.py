"""Refusals in the shape OpenAI's API gives them, which its SDKs turn into their own exceptions:
`{"error": {"message", "type", "param", "code"}}` with the HTTP status that names the case
(400 BadRequestError, 401 AuthenticationError, 404 NotFoundError, 409 ConflictError,
429 RateLimitError, 5xx InternalServerError).

Every refusal has a `code`, stable snake_case a client can branch on (docs/gateway.md lists
them); the message is for people and may change. The codes of a refused field's value:"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.http import JsonResponse

from conversations.services import errors as refusals

INVALID_REQUEST = "invalid_request_error"
SERVER_ERROR = "server_error"
RATE_LIMITED = "requests"  # OpenAI's type for a limit on requests
TOKENS = "tokens"  # and for a limit on tokens: a budget

MISSING_FIELD = "missing_field"  # a field the call needs is absent
INVALID_VALUE = "invalid_value"  # of the wrong type, out of range, or malformed
TOO_LONG = "too_long"  # text over its limit
TOO_MANY = "too_many"  # a list over its limit: messages, stop sequences, files
UNSUPPORTED_PARAMETER = "unsupported_parameter"  # would change the reply in a way not served
UNSUPPORTED_CONTENT = "unsupported_content"  # a message or part this server cannot take

# How long a client should wait before it tries again, where trying again can help.
RETRY_ENGINE_S = 1  # a failed reply: the next one is a new engine call
RETRY_UNAVAILABLE_S = 5  # a model that cannot be served now: its server or its settings


@dataclass(eq=False)  # compared and hashed by identity, as exceptions are
class GatewayError(Exception):
    status: int
    message: str
    type: str = INVALID_REQUEST
    param: str | None = None
    code: str = field(kw_only=True)  # required: see the module's docstring
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def response(self) -> JsonResponse:
        return JsonResponse(self.body(), status=self.status, headers=self.headers)


def bad_request(message: str, param: str | None = None, code: str = INVALID_VALUE) -> GatewayError:
    return GatewayError(400, message, param=param, code=code)


def unauthenticated(message: str) -> GatewayError:
    return GatewayError(
        401,
        message,
        code="invalid_api_key",
        headers={"WWW-Authenticate": 'Bearer realm="api"'},
    )


def model_not_found(slug: str) -> GatewayError:
    return GatewayError(
        404,
        f"The model {slug!r} does not exist or is not available to you; GET /v1/models "
        "lists yours.",
        param="model",
        code="model_not_found",
    )


def conversation_not_found() -> GatewayError:
    return GatewayError(
        404, "There is no such conversation of yours.", code="conversation_not_found"
    )


def from_refusal(refusal: refusals.SendRefused) -> GatewayError:
    """A send the generation service refused, as the chat page's socket would say it."""
    message = str(refusal)
    if isinstance(refusal, refusals.RateLimited):
        # Too many replies at once has no window to wait out: one finishing is the cure, so
        # try again soon.
        wait = refusal.retry_after or 1
        return GatewayError(
            429,
            message,
            type=TOKENS if isinstance(refusal, refusals.BudgetExhausted) else RATE_LIMITED,
            code=_LIMIT_CODES.get(refusal.code, refusal.code),
            headers={"Retry-After": str(wait)},
        )
    if isinstance(refusal, refusals.ModelUnavailable):
        return GatewayError(404, message, param="model", code="model_not_found")
    if isinstance(refusal, refusals.ConversationGone):
        return conversation_not_found()
    if isinstance(refusal, refusals.EngineUnavailable):
        return GatewayError(
            503,
            message,
            type=SERVER_ERROR,
            code=refusal.code,
            headers={"Retry-After": str(RETRY_UNAVAILABLE_S)},
        )
    # A reply still being written in that conversation, or a repeated send.
    return GatewayError(409, message, code=refusal.code)


# OpenAI's code for a rate limit; chatsite's own codes for the others (see services.errors).
_LIMIT_CODES = {refusals.RateLimited.code: "rate_limit_exceeded"}
