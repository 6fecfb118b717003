"""Errors of the OpenAI-compatible API, in OpenAI's shape: ``{"error": {message, type, param, code}}``."""

from __future__ import annotations

import orjson
from django.utils.translation import gettext as _

from monitor.public import LlamaError, LlamaRejected, LlamaUnavailable


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        payload: dict | None = None,
        retry_after_s: int | None = None,
    ):
        super().__init__(str(message))
        self.status = status
        self.type = type
        self.code = code
        self.param = param
        self.payload = payload  # an upstream body relayed as is
        self.retry_after_s = retry_after_s  # sent as Retry-After

    def body(self) -> dict:
        if self.payload is not None:
            return self.payload
        return {"error": {"message": str(self), "type": self.type, "param": self.param, "code": self.code}}

    def sse_event(self) -> bytes:
        """The same error as a stream's last event, for failures after the answer began."""
        return b"data: " + orjson.dumps(self.body()) + b"\n\n"

    @classmethod
    def from_upstream(cls, rejection: LlamaRejected) -> ApiError:
        """llama-server's own error (already OpenAI-shaped) with its status."""
        status = rejection.status or 502
        payload = rejection.payload if isinstance((rejection.payload or {}).get("error"), dict) else None
        return cls(
            status, str(rejection), type="server_error" if status >= 500 else "invalid_request_error", payload=payload
        )


def unavailable() -> ApiError:
    return ApiError(503, _("The model server is not reachable right now."), type="server_error", code="unavailable")


def broken() -> ApiError:
    return ApiError(
        502, _("The model server stopped in the middle of the answer."), type="server_error", code="stream_broken"
    )


def queue_unavailable() -> ApiError:
    return ApiError(
        503, _("The request queue is not reachable right now; retry shortly."), type="server_error", code="unavailable"
    )


def from_llama(error: LlamaError) -> ApiError:
    """What an API client is told of a failed request (the node was already reported by its slot)."""
    if isinstance(error, LlamaRejected):
        return ApiError.from_upstream(error)
    if isinstance(error, LlamaUnavailable):
        return unavailable()
    return broken()


def not_found(model: str) -> ApiError:
    return ApiError(
        404,
        _("The model '%(model)s' does not exist or is not available: GET /v1/models lists them.")
        % {"model": model[:100]},
        code="model_not_found",
        param="model",
    )
