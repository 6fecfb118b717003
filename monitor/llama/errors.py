"""llama-server's errors as our own types: ``str(error)`` is always fit to show to the person who asked."""

from __future__ import annotations

import json

from django.utils.translation import gettext_lazy as _


class LlamaError(Exception):
    """An error the user may see; ``str(error)`` is fit to show."""

    default_message = _("The model server returned an error.")

    def __init__(self, message: str | None = None, *, status: int | None = None):
        super().__init__(str(message or self.default_message))
        self.status = status


class LlamaUnavailable(LlamaError):
    default_message = _("The model server is not reachable right now.")


class LlamaInstanceGone(LlamaUnavailable):
    """A router answered, but the model instance it would send the request to is gone (killed, crashed):
    the router itself is fine."""


class LlamaStreamBroken(LlamaError):
    default_message = _("The model server stopped in the middle of the answer.")


class LlamaHung(LlamaStreamBroken):
    """No byte came for a stall limit and the caller's check said llama-server is not working on it."""

    default_message = _("The model server stopped responding; the partial answer was kept.")


class LlamaRejected(LlamaError):
    """llama-server answered with an error status (bad request, context too long...)."""

    # llama-server's own error body when it sent JSON (already OpenAI-shaped), for relaying.
    payload: dict | None = None


def rejection_from(status: int, body: bytes) -> LlamaRejected | LlamaInstanceGone:
    """An error status as our error: llama-server's own message (its JSON body relayed as is), or, for a
    router that could not reach the instance it proxies to, that the model server is not reachable."""
    payload = None
    try:
        payload = json.loads(body)
        message = payload.get("error", {}).get("message") or body.decode(errors="replace")
    except (ValueError, AttributeError):
        message = body.decode(errors="replace")[:500]
    if (status >= 500 and message.startswith("proxy error")) or message == "model is not loaded":
        return LlamaInstanceGone(status=status)
    rejection = LlamaRejected(message, status=status)
    rejection.payload = payload if isinstance(payload, dict) else None
    return rejection
