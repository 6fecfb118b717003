"""An API call once it is admitted: its endpoint, checked body and the pool of the profile it names, and
which conversation it continues (an agent sends the whole conversation again each turn)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import orjson

from monitor.public import ServingPool

# Our endpoint → llama-server's path.
ENDPOINTS = {
    "chat/completions": "/v1/chat/completions",
    "completions": "/v1/completions",
    "embeddings": "/v1/embeddings",
}


@dataclass
class ApiCall:
    endpoint: str
    body: dict
    pool: ServingPool

    @property
    def path(self) -> str:
        return ENDPOINTS[self.endpoint]

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream", False))

    @property
    def profile(self) -> str:
        return self.pool.profile.name

    def affinity(self) -> tuple[str, str]:
        """(the conversation this call continues, the one it makes): the call before this one sent every
        message up to the last assistant message; this call's own messages name what the next one continues."""
        messages = self.body.get("messages")
        if self.endpoint != "chat/completions" or not isinstance(messages, list):
            return "", ""
        roles = [message.get("role") if isinstance(message, dict) else None for message in messages]
        last_answer = max((index for index, role in enumerate(roles) if role == "assistant"), default=-1)
        before = _conversation_key(self.profile, messages[:last_answer]) if last_answer > 0 else ""
        return before, _conversation_key(self.profile, messages)


def _conversation_key(profile: str, messages: list) -> str:
    digest = hashlib.sha256(orjson.dumps([profile, messages], option=orjson.OPT_SORT_KEYS)).hexdigest()
    return "api:" + digest[:32]
