"""The dashboard's live push: the newest sample about once a second, to staff only."""

from __future__ import annotations

import asyncio
import time

import orjson
import redis.asyncio as aioredis
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from monitor.telemetry.sampler import LIVE_KEY, live_points

PUSH_EVERY_S = 1.0
# The sampler writes every second: a newest sample older than this means it is not running.
STALE_AFTER_S = 5.0


class DashboardConsumer(AsyncJsonWebsocketConsumer):
    @classmethod
    async def encode_json(cls, content) -> str:
        return orjson.dumps(content).decode()

    async def connect(self):
        user = self.scope.get("user")
        if not user or not user.is_authenticated or not user.is_staff:
            await self.close(code=4403)
            return
        self.redis = aioredis.Redis.from_url(settings.REDIS_URL)
        await self.accept()
        self.pusher = asyncio.create_task(self._push())

    async def disconnect(self, code):
        pusher = getattr(self, "pusher", None)
        if pusher:
            pusher.cancel()
        if hasattr(self, "redis"):
            await self.redis.aclose()

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        pass  # the page only listens

    async def _push(self) -> None:
        keep = live_points()
        last_t = 0.0
        try:
            recent = await self.redis.lrange(LIVE_KEY, 0, keep - 1)
            samples = [orjson.loads(raw) for raw in reversed(recent)]
            await self.send_json({"type": "history", "samples": samples})
            if samples:
                last_t = samples[-1]["t"]
        except Exception:  # Redis down: the loop below says so each second
            pass
        while True:
            await asyncio.sleep(PUSH_EVERY_S)
            try:
                raw = await self.redis.lindex(LIVE_KEY, 0)
            except Exception:
                await self.send_json({"type": "stale", "reason": "redis"})
                continue
            sample = orjson.loads(raw) if raw else None
            if sample and sample["t"] > last_t:
                last_t = sample["t"]
                await self.send_json({"type": "sample", "sample": sample})
            if not sample or time.time() - sample["t"] > STALE_AFTER_S:
                await self.send_json(
                    {"type": "stale", "reason": "sampler", "age": time.time() - last_t if last_t else None}
                )
