"""Refusals in the shape OpenAI's API gives them, which its SDKs turn into their own exceptions:
`{"error": {"message", "type", "param", "code"}}` with the HTTP status that names the case
(400 BadRequestError, 401 AuthenticationError, 404 NotFoundError, 409 ConflictError,
429 RateLimitError, 5xx InternalServerError)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.http import JsonResponse

from conversations.services import errors as refusals

INVALID_REQUEST = "invalid_request_error"
SERVER_ERROR = "server_error"
RATE_LIMITED = "requests"  # OpenAI's type for a limit on requests
TOKENS = "tokens"  # and for a limit on tokens: a budget


@dataclass(eq=False)  # compared and hashed by identity, as exceptions are
class GatewayError(Exception):
    status: int
    message: str
    type: str = INVALID_REQUEST
    param: str | None = None
    code: str | None = None
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


def bad_request(message: str, param: str | None = None, code: str | None = None) -> GatewayError:
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
        return GatewayError(503, message, type=SERVER_ERROR, code=refusal.code)
    # A reply still being written in that conversation, or a repeated send.
    return GatewayError(409, message, code=refusal.code)


# OpenAI's code for a rate limit; chatsite's own codes for the others (see services.errors).
_LIMIT_CODES = {refusals.RateLimited.code: "rate_limit_exceeded"}
