"""Why a profile cannot serve: errors a person or an admin may see (``str(error)`` is fit to show)."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

from monitor.llama.errors import LlamaError


class ProfileUnavailable(LlamaError):
    default_message = _("This server profile is not available.")


class LoadFailed(LlamaError):
    """A profile did not load; the message says why, in llama-server's words where it gave some."""

    def __init__(self, message: str, *, log_tail: list[str] | None = None, exit_code: int | None = None):
        super().__init__(message)
        self.log_tail = log_tail or []
        self.exit_code = exit_code
