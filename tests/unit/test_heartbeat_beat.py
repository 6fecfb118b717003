"""One beat of a node's heartbeat when an instance the router lists as loaded does not answer for its
slots (frozen, or gone, right after its load): seen in a whole-suite run, where a profile frozen before
the heartbeat had asked its slots failed every beat (the node out of every pool, and the frozen instance
never restarted, for minutes). That instance alone is left out; the others are published, and the
recoveries requests asked for run."""

from __future__ import annotations

import asyncio

from monitor.llama.errors import LlamaUnavailable
from monitor.router import heartbeat


def test_an_instance_that_does_not_say_its_slots_is_left_out_of_this_beat_alone(monkeypatch):
    beat = heartbeat.Heartbeat(lambda: None, lambda reason: None)
    published: list[dict] = []
    recovered: list[str] = []

    async def models() -> list[dict]:
        return [{"id": "chat@1", "status": {"value": "loaded"}}, {"id": "frozen@2", "status": {"value": "loaded"}}]

    async def slots_of(model: str) -> int:
        if model == "frozen@2":
            raise LlamaUnavailable()
        return 2

    async def recover(model: str, why: str) -> None:
        recovered.append(model)

    def publish(node: str, serving: dict, router: bool = True) -> dict[str, str]:
        published.append(serving)
        return {"frozen@2": "a request found it frozen"}

    monkeypatch.setattr(beat, "_router_models", models)
    monkeypatch.setattr(beat, "_slots_of", slots_of)
    monkeypatch.setattr(beat, "_recover", recover)
    monkeypatch.setattr(heartbeat, "live_ids_here", lambda: {"chat": "chat@1", "frozen": "frozen@2"})
    monkeypatch.setattr(heartbeat.readiness, "publish", publish)
    monkeypatch.setattr(beat.watchdog, "due", lambda: False)

    with asyncio.Runner() as runner:
        beat.beat(runner)

    assert published == [{"chat": (2, "chat@1")}]
    assert recovered == ["frozen@2"]
    assert "frozen@2" not in beat.slots  # asked again at the next beat
