class ChatError(Exception):
    """A refusal or failure whose message is shown to the user as is."""


class NotFound(ChatError):
    """Unknown id, or something that belongs to another user (never told apart)."""
