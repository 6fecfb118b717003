"""Errors people can meet in chat; their message is fit to show as is."""


class ChatError(Exception):
    """A refusal or failure whose message is shown to the user as is."""


class NotFound(ChatError):
    """Unknown id, or something that belongs to another user (never told apart)."""


class DocumentError(ChatError):
    """A document refused or failed; the message names the reason."""


class PasswordNeeded(DocumentError):
    """The PDF is encrypted and the password was missing or wrong."""
