"""The serving slot: the one way a request reaches a model, for chat turns, API calls and summaries alike.

::

    pool = await serving_pool(profile)             # loaded first if no node serves it (``on_loading``)
    async with pool.slot(owner, priority="person", affinity=key) as slot:
        await slot.stream_chat(...)          # the node the queue chose, the revision it serves, watched

``serving_pool`` finds the nodes that serve a profile now (their heartbeats in Redis; a cold profile
is loaded first) and gives what a request needs to be prepared before it waits in line: the serving
facts (context per slot, vision...) and a client for token counts. ``slot`` waits in the profile's
fair queue and yields the node it was given, a client for the revision that node serves at that
moment (so a change that went live while the request waited is taken up, with no second read of the
profile) and that instance's facts. A request that finds its node failing takes the node (or only its
instance) out of the pool for everyone at once; a frozen instance is also handed to its node to restart.

A follow-up (``affinity``: a conversation's key) goes back to the node that served the conversation
last, where llama-server keeps its prompt cached, whenever that costs less than computing the whole
prompt again elsewhere: it waits for that node at most the time a full prompt pass would take there
(the rule of renting skis: never pay more than twice the best choice in hindsight), then takes any
free node.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from asgiref.sync import sync_to_async
from celery import current_app
from django.conf import settings
from django.utils.translation import gettext as _

from monitor.awaiting import await_while_alive
from monitor.llama.client import LlamaClient
from monitor.llama.errors import LlamaError, LlamaHung, LlamaInstanceGone, LlamaStreamBroken, LlamaUnavailable
from monitor.llama.serving import ServingInfo, forget_serving_info, serving_info
from monitor.models import ServerProfile
from monitor.nodes import readiness
from monitor.nodes.registry import node_queue, placement_here
from monitor.profiles.clients import client_at, remote_client
from monitor.profiles.errors import LoadFailed
from monitor.profiles.loading import ensure_serving
from monitor.profiles.presets import live_id
from monitor.profiles.selectors import find_profile
from monitor.profiles.status import router_status
from monitor.redis_clients import LoopRedis
from monitor.serving.members import Members, Served, members_now, pool_now
from monitor.serving.queue import FairQueue, Grant, PositionCallback, Priority

log = logging.getLogger(__name__)
T = TypeVar("T")
AFFINITY_TTL_S = 3600
STILL_WORKING_TIMEOUT_S = 3.0
LoadingCallback = Callable[[str], Awaitable[None]]
LOAD_POLL_S = 0.25
_redis = LoopRedis()


@functools.cache
def pool_queue(name: str) -> FairQueue:
    """The fair queue of a profile's pool (one per profile name)."""
    return FairQueue(name)


async def _needs_loading(profile: ServerProfile) -> bool:
    """Whether the profile's live revision on this node must be loaded first (worth telling the person)."""
    statuses = await router_status()
    placement = await sync_to_async(placement_here)(profile)
    return statuses.get(live_id(profile, placement), {}).get("value") not in ("loaded", "sleeping")


def _client(profile: ServerProfile, members: Members, node: str, model: str) -> LlamaClient:
    if profile.is_remote:
        return remote_client(profile)
    url, key = members[node]
    return client_at(url, key, model)


@dataclass
class ServingSlot:
    """A slot held on one node: the client to send the request with, and what that instance serves."""

    profile: ServerProfile
    node: str
    client: LlamaClient
    info: ServingInfo
    grant: Grant
    remember_as: str = ""
    # When its owner asked for it and when the queue gave it (time.monotonic): the wait, and the time served.
    asked_at: float = 0.0
    granted_at: float = 0.0
    _failed: bool = False

    # The requests of a slot, watched for a frozen server: nothing for the profile's hang limit, and no
    # answer to a check either (``still_working``), is LlamaHung. A request that fails reports its node
    # itself (``_report``), whatever its caller turns the error into: the slot decides, never the caller.

    def stream_chat(self, payload: dict, *, pace_s: float = 0.0) -> AsyncIterator[list[dict]]:
        return self._reported(self.client.stream_chat(payload, pace_s=pace_s, **self._watch()))

    def stream_raw(self, path: str, payload: dict, *, pace_s: float = 0.0) -> AsyncIterator[bytes]:
        return self._reported(self.client.stream_raw(path, payload, pace_s=pace_s, **self._watch()))

    async def post_raw(self, path: str, payload: dict) -> bytes:
        """A plain request's answer (its body comes at the end): the server is checked every hang limit
        while it is being written."""
        try:
            return await await_while_alive(
                self.client.post_raw(path, payload), self.still_working, self.profile.hang_limit_s, LlamaHung
            )
        except LlamaError as error:
            await self._report(error)
            raise

    async def _reported(self, stream: AsyncIterator[T]) -> AsyncIterator[T]:
        try:
            async for item in stream:
                yield item
        except LlamaError as error:
            await self._report(error)
            raise
        finally:
            await stream.aclose()

    def _watch(self) -> dict:
        """A silent stream is looked at every POOL_OUT_CHECK_S: its node marked out of the pool (missed
        heartbeats, router not answering, another request saw it fail) releases it at once (LlamaHung,
        so the answer goes on elsewhere); silent for the hang limit, the instance itself is asked."""
        hang_s = float(self.profile.hang_limit_s)
        every_s = min(hang_s, settings.POOL_OUT_CHECK_S) if settings.POOL_OUT_CHECK_S > 0 else hang_s
        silent = {"s": 0.0}

        async def on_stall() -> bool:
            silent["s"] += every_s
            if not await self.still_in_pool():
                log.warning("%s left the pool of %s mid-answer: its answer is released", self.node, self.profile.name)
                return False
            if silent["s"] < hang_s:
                return True
            silent["s"] = 0.0
            return await self.still_working()

        return {"stall_s": every_s, "on_stall": on_stall}

    async def still_in_pool(self) -> bool:
        """Whether the pool still counts this node as serving the profile (its heartbeat, and no request
        saw it fail since). Redis away or just restarted: yes (the instance check decides then)."""
        return self.profile.is_remote or not await readiness.left_pool(self.node, self.profile.name)

    async def still_working(self) -> bool:
        """Whether the instance answers at all (its ``/slots``, within a few seconds): a long prompt being
        read is work; a frozen process or a deadlocked loop answers nothing."""
        try:
            await self.client.get_json("/slots", timeout_s=STILL_WORKING_TIMEOUT_S)
        except LlamaError:
            return False
        return True

    async def _report(self, error: LlamaError) -> None:
        """The request failed on this node: a node (or instance) that failed gets no more slots until its
        heartbeat says it serves again; a frozen one is restarted by its node. Once per slot."""
        if not self._failed:
            self._failed = True
            await _take_out(self.profile.name, self.grant, error)

    async def remember(self, stats: dict) -> None:
        """After an answer: this node now holds the conversation's cache, worth ``prompt + answer`` tokens
        at the prompt speed measured (what recomputing it elsewhere would cost)."""
        if not self.remember_as:
            return
        tokens = sum(int(stats.get(name) or 0) for name in ("prompt_tokens", "cached_tokens", "output_tokens"))
        speed = float(stats.get("prompt_per_second") or 0)
        try:
            key = _affinity_key(self.profile.name, self.remember_as)
            await _redis.get().set(key, f"{self.node} {tokens} {speed}", ex=AFFINITY_TTL_S)
        except Exception:  # a preference, never a reason to fail an answer
            log.debug("could not remember the node of %s", self.remember_as, exc_info=True)


def _affinity_key(pool: str, affinity: str) -> str:
    return f"qwenweb:affinity:{pool}:{affinity}"


async def _preference(pool: str, affinity: str) -> tuple[str, float]:
    """The node a follow-up would rather have, and how long it may wait for it (a full prompt pass there)."""
    if not affinity:
        return "", 0.0
    try:
        value = await _redis.get().get(_affinity_key(pool, affinity))
    except Exception:  # a preference, never a reason to fail a request
        return "", 0.0
    if not value:
        return "", 0.0
    node, tokens, speed = value.decode().split(" ")
    recompute_s = int(tokens) / float(speed) if float(speed) > 0 else 0.0
    return node, min(recompute_s, settings.POOL_AFFINITY_MAX_WAIT_S)


class PromptCounter(Protocol):
    """What a request may ask a pool's client before it waits in line: its prompt's template and token
    counts (cheap, no generation). Everything that generates goes through a slot."""

    async def apply_template(self, messages: list[dict], **kwargs: Any) -> str: ...

    async def count_tokens(self, text: str) -> int: ...


@dataclass
class ServingPool:
    """A profile and the nodes that serve it; ``info`` and ``client`` are one serving node's, ``slots``
    the pool's (every serving node's) when it was found."""

    profile: ServerProfile
    members: Members
    info: ServingInfo
    client: LlamaClient
    slots: int

    @asynccontextmanager
    async def slot(
        self,
        owner: str,
        *,
        priority: Priority = "person",
        on_position: PositionCallback | None = None,
        affinity: str = "",
        remember_as: str | None = None,
        eligible: Callable[[str], bool] | None = None,
    ) -> AsyncIterator[ServingSlot]:
        """Wait in the profile's fair queue, then hold a slot on the node it gives for the block.

        ``affinity``: the conversation this request continues (its node is preferred); ``remember_as``:
        the one its answer makes (default: the same), whose node ``remember`` records; ``eligible``: the
        nodes it may have (an answer going on: those with its model file), all when not given."""
        queue = pool_queue(self.profile.name)
        preferred, patience_s = await _preference(self.profile.name, affinity)
        asked_at = time.monotonic()

        async def nodes_now() -> list[str]:
            self.members = await members_now(self.profile)
            return [node for node in self.members if eligible is None or eligible(node)]

        grant = await queue.acquire(
            owner,
            nodes_now,
            priority=priority,
            affinity=preferred,
            patience_s=patience_s,
            on_position=on_position,
        )
        serving = None
        try:
            client = _client(self.profile, self.members, grant.node, grant.model)
            info = self.info if client is self.client else await serving_info(client)
            remembered = affinity if remember_as is None else remember_as
            serving = ServingSlot(
                self.profile,
                grant.node,
                client,
                info,
                grant,
                remembered,
                asked_at=asked_at,
                granted_at=time.monotonic(),
            )
            yield serving
        except LlamaError as error:  # one the slot's own requests did not see (a client call by the caller)
            if serving is not None:
                await serving._report(error)
            else:
                await _take_out(self.profile.name, grant, error)
            raise
        finally:
            await queue.release(grant)


async def _take_out(pool: str, grant: Grant, error: LlamaError) -> None:
    """A failing node (or instance) gets no more slots until its heartbeat says it serves again."""
    forget_serving_info()
    try:
        if isinstance(error, LlamaHung):
            log.warning("%s on %s is frozen (%s): its node restarts it", grant.model, grant.node, error)
            await readiness.request_recovery(grant.node, pool, grant.model, str(error))
        elif isinstance(error, (LlamaStreamBroken, LlamaInstanceGone)):  # the instance failed, not the node
            await readiness.mark_failed(grant.node, pool)
        elif isinstance(error, LlamaUnavailable):  # its router did not answer
            await readiness.mark_failed(grant.node)
    except Exception:  # Redis down: the heartbeat's expiry takes the node out by itself
        log.warning("could not take %s out of %s", grant.node, pool, exc_info=True)


async def serving_pool(
    profile: ServerProfile | str | None, *, for_users: bool = False, on_loading: LoadingCallback | None = None
) -> ServingPool:
    """The profile's pool, loaded first when no node serves it (``on_loading(name)`` is told then).

    Raises ProfileUnavailable for an unknown profile, LoadFailed when it cannot load, LlamaUnavailable
    when its server does not answer."""
    if not isinstance(profile, ServerProfile):
        profile = await sync_to_async(find_profile)(profile, for_users=for_users)
    members, served = await pool_now(profile)
    if not members:
        raise LoadFailed(_("%(name)s is not placed on any node.") % {"name": profile.name})
    if not served:
        served = await _bring_up(profile, members, on_loading)
    node, (_slots, model) = next(iter(served.items()))
    client = _client(profile, members, node, model)
    try:
        info = await serving_info(client)
    except LlamaInstanceGone:  # unloaded since its node's last beat said it serves: out, and brought up again
        await readiness.mark_failed(node, profile.name)
        served = await _bring_up(profile, members, on_loading)
        node, (_slots, model) = next(iter(served.items()))
        client = _client(profile, members, node, model)
        info = await serving_info(client)
    slots = sum(node_slots for node_slots, _model in served.values())
    return ServingPool(profile, members, info, client, slots)


async def _bring_up(profile: ServerProfile, members: Members, on_loading: LoadingCallback | None) -> Served:
    """No node serves the profile (as far as the heartbeats said): read the remote server, or load it, on
    this node in this process when it is one of the pool's, else on every node of the pool (their own
    workers' queues), and take the first that serves."""
    nodes = list(members)
    if profile.is_remote:
        client = remote_client(profile)
        info = await serving_info(client, fresh=True)
        model = profile.remote_model or ""
        await readiness.mark_ready(nodes[0], profile.name, info.total_slots, model, ttl_s=readiness.REMOTE_READY_TTL_S)
        return {nodes[0]: (info.total_slots, model)}
    if settings.NODE_NAME in members:
        if on_loading is not None and await _needs_loading(profile):
            await on_loading(profile.name)
        _send_loads(profile, [node for node in nodes if node != settings.NODE_NAME])  # the rest of the pool too
        model = await ensure_serving(profile)
        info = await serving_info(_client(profile, members, settings.NODE_NAME, model))
        await readiness.mark_ready(settings.NODE_NAME, profile.name, info.total_slots, model)
        return {settings.NODE_NAME: (info.total_slots, model)}
    if on_loading is not None:
        await on_loading(profile.name)
    return await load_on_nodes(profile, nodes)


async def load_on_nodes(profile: ServerProfile, nodes: list[str]) -> Served:
    """Have each node load the profile (a job on its own queue); wait until one serves it. LoadFailed when
    none could (their reasons), or none did within QWENWEB_PROFILE_LOAD_TIMEOUT_S."""
    jobs = _send_loads(profile, nodes)
    deadline = time.monotonic() + settings.PROFILE_LOAD_TIMEOUT_S
    while time.monotonic() < deadline:
        served = await readiness.served_on(nodes, profile.name)
        if served:
            return served
        outcomes = await asyncio.to_thread(_outcomes, jobs)
        if len(outcomes) == len(jobs) and not any(outcome.get("ok") for outcome in outcomes):
            raise LoadFailed("; ".join(f"{o.get('node')}: {o.get('error', '')}" for o in outcomes))
        await asyncio.sleep(LOAD_POLL_S)
    raise LoadFailed(
        _("%(name)s did not load within %(s)d s.") % {"name": profile.name, "s": settings.PROFILE_LOAD_TIMEOUT_S}
    )


def _send_loads(profile: ServerProfile, nodes: list[str]) -> list:
    """A load of the profile for each node, on its own queue (its worker runs it there)."""
    return [
        current_app.send_task("monitor.tasks.load_profile", (profile.pk,), queue=node_queue(node)) for node in nodes
    ]


def _outcomes(jobs: list) -> list[dict]:
    """What the load jobs that ended returned (a job that crashed: its error)."""
    results = [job.result for job in jobs if job.ready()]
    return [result if isinstance(result, dict) else {"ok": False, "error": str(result)} for result in results]
