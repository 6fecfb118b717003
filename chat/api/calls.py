"""An API call once it is admitted: its endpoint, checked body and the pool of the profile it names, and
which conversation it continues (an agent sends the whole conversation again each turn)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import orjson

from monitor.public import ServingPool

# What kind of profile (``ServerProfile.Kind``) answers each endpoint.
KINDS = {"chat/completions": "chat", "completions": "chat", "embeddings": "embedding", "rerank": "rerank"}


@dataclass
class ApiCall:
    endpoint: str
    body: dict
    pool: ServingPool
    returns_documents: bool = False

    @property
    def path(self) -> str:
        """llama-server's path: the same endpoint under /v1/."""
        return "/v1/" + self.endpoint

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream", False))

    def finish(self, answer: dict) -> None:
        """What the API answers beyond llama-server's answer: a rerank's documents, when asked for (Jina's and
        Cohere's ``return_documents``; llama-server returns indexes and scores only)."""
        if self.endpoint == "rerank" and self.returns_documents:
            texts = self.body["documents"]
            for result in answer.get("results") or []:
                index = result.get("index") if isinstance(result, dict) else None
                if isinstance(index, int) and 0 <= index < len(texts):
                    result["document"] = {"text": texts[index]}

    def affinity(self) -> tuple[str, str]:
        """(the conversation this call continues, the one it makes): the call before this one sent every
        message up to the last assistant message; this call's own messages name what the next one continues."""
        messages = self.body.get("messages")
        if self.endpoint != "chat/completions" or not isinstance(messages, list):
            return "", ""
        roles = [message.get("role") if isinstance(message, dict) else None for message in messages]
        last_answer = max((index for index, role in enumerate(roles) if role == "assistant"), default=-1)
        profile = self.pool.profile.name
        before = _conversation_key(profile, messages[:last_answer]) if last_answer > 0 else ""
        return before, _conversation_key(profile, messages)


def _conversation_key(profile: str, messages: list) -> str:
    digest = hashlib.sha256(orjson.dumps([profile, messages], option=orjson.OPT_SORT_KEYS)).hexdigest()
    return "api:" + digest[:32]
