"""The dashboard's live push: the newest sample about once a second, to staff only.

It reads the sampler's samples from Redis itself (no Channels layer): while Redis is away the page
is told ("stale"), and the pushes go on, on the same socket, once Redis is back
(tests/integration/test_dashboard.py)."""

from __future__ import annotations

import asyncio
import time

import orjson
import redis.asyncio as aioredis
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from monitor.telemetry.sampler import LIVE_KEY, WAKE_KEY, WATCHED_KEY, live_points

PUSH_EVERY_S = 1.0
# While a dashboard is open the sampler writes every second (it reads WATCHED_KEY, which each open
# dashboard keeps set); the first page to open wakes it (WAKE_KEY). A newest sample older than one
# idle interval and a few seconds more means the sampler is not running.
STALE_AFTER_S = settings.MONITOR_IDLE_SAMPLE_INTERVAL_S + 3.0
WATCHED_FOR_S = 5


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
            # The live window by time: samples taken while nobody watched are an idle interval apart, not 1 s.
            since = time.time() - settings.MONITOR_LIVE_SECONDS
            samples = [sample for sample in (orjson.loads(raw) for raw in reversed(recent)) if sample["t"] >= since]
            await self.send_json({"type": "history", "samples": samples})
            if samples:
                last_t = samples[-1]["t"]
        except Exception:  # Redis down: the loop below says so each second
            pass
        while True:
            try:
                raw, watched_before = await (
                    self.redis.pipeline(transaction=False)
                    .lindex(LIVE_KEY, 0)
                    .set(WATCHED_KEY, 1, ex=WATCHED_FOR_S, get=True)
                    .execute()
                )
                if watched_before is None:  # nobody watched: the sampler waits out its idle interval
                    await self.redis.pipeline(transaction=False).rpush(WAKE_KEY, 1).expire(WAKE_KEY, 60).execute()
            except Exception:
                await self.send_json({"type": "stale", "reason": "redis"})
                await asyncio.sleep(PUSH_EVERY_S)
                continue
            sample = orjson.loads(raw) if raw else None
            if sample and sample["t"] > last_t:
                last_t = sample["t"]
                await self.send_json({"type": "sample", "sample": sample})
            if not sample or time.time() - sample["t"] > STALE_AFTER_S:
                await self.send_json(
                    {"type": "stale", "reason": "sampler", "age": time.time() - last_t if last_t else None}
                )
            await asyncio.sleep(PUSH_EVERY_S)
