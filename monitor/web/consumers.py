"""The dashboard's live push, to staff only, about once a second: the main box's newest sample (its
cards and charts) and every node's card (its heartbeat, what it serves, its sampler's figures).

It reads the samplers' samples and the heartbeats from Redis itself (no Channels layer): while Redis is
away the page is told ("stale"), and the pushes go on, on the same socket, once Redis is back
(tests/integration/test_dashboard.py)."""

from __future__ import annotations

import asyncio
import time

import orjson
import redis.asyncio as aioredis
from asgiref.sync import sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from monitor.redis_clients import raise_if_cancelling
from monitor.telemetry.live import WATCHED_KEY, live_key, wake_key
from monitor.telemetry.node_status import add_live_reads, live_from, main_node, node_rows, node_views
from monitor.telemetry.sampler import live_points

PUSH_EVERY_S = 1.0
# While a dashboard is open every node's sampler writes every second (it reads WATCHED_KEY, which each
# open dashboard keeps set); the first page to open wakes them (wake_key). A newest sample older than one
# idle interval and a few seconds more means the sampler is not running.
STALE_AFTER_S = settings.MONITOR_IDLE_SAMPLE_INTERVAL_S + 3.0
WATCHED_FOR_S = 5
NODES_EVERY_S = 10.0  # the list of nodes is read from the database this often


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
            # Ended before its Redis client closes: a command that the close cuts could otherwise end in
            # a connection error rather than the cancellation (see ``_push``).
            await asyncio.wait([pusher], timeout=5)
        if hasattr(self, "redis"):
            await self.redis.aclose()

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        pass  # the page only listens

    async def _push(self) -> None:
        task = asyncio.current_task()
        main = await sync_to_async(main_node)()
        last_t = await self._history(main)
        nodes: list[dict] = []
        nodes_at = -NODES_EVERY_S
        while True:
            if time.monotonic() - nodes_at >= NODES_EVERY_S:
                nodes = await sync_to_async(node_rows)() or [{"name": main, "is_local": True}]
                nodes_at = time.monotonic()
            names = [node["name"] for node in nodes]
            if main not in names:
                names.append(main)
            try:
                samples, beats, states = await self._look(names)
            except Exception:
                # The page went away while a Redis call ran: pushing on would be for no page, and keep
                # every node's sampler at a sample a second, for the process's life.
                raise_if_cancelling(task)
                await self.send_json({"type": "stale", "reason": "redis"})
                await asyncio.sleep(PUSH_EVERY_S)
                continue
            sample = samples.get(main)
            if sample and sample["t"] > last_t:
                last_t = sample["t"]
                await self.send_json({"type": "sample", "sample": sample})
            await self.send_json({"type": "nodes", "nodes": node_views(nodes, beats, states, samples, time.time())})
            if not sample or time.time() - sample["t"] > STALE_AFTER_S:
                await self.send_json(
                    {"type": "stale", "reason": "sampler", "age": time.time() - last_t if last_t else None}
                )
            await asyncio.sleep(PUSH_EVERY_S)

    async def _history(self, main: str) -> float:
        """The main box's live window so far; the time of its newest sample (0: none)."""
        try:
            recent = await self.redis.lrange(live_key(main), 0, live_points() - 1)
        except Exception:  # Redis down: the loop says so each second
            return 0.0
        # The live window by time: samples taken while nobody watched are an idle interval apart, not 1 s.
        since = time.time() - settings.MONITOR_LIVE_SECONDS
        samples = [sample for sample in (orjson.loads(raw) for raw in reversed(recent)) if sample["t"] >= since]
        await self.send_json({"type": "history", "samples": samples})
        return samples[-1]["t"] if samples else 0.0

    async def _look(self, names: list[str]):
        """Every node's newest sample, beat and state in one round trip; keeps every sampler watched
        (and wakes them when nobody watched before)."""
        pipe = self.redis.pipeline(transaction=False)
        add_live_reads(pipe, names)
        pipe.set(WATCHED_KEY, 1, ex=WATCHED_FOR_S, get=True)
        *replies, watched_before = await pipe.execute()
        if watched_before is None:  # nobody watched: each sampler waits out its idle interval
            wake = self.redis.pipeline(transaction=False)
            for name in names:
                wake.rpush(wake_key(name), 1).expire(wake_key(name), 60)
            await wake.execute()
        return live_from(names, replies)
