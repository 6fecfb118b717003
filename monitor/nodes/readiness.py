"""What each node serves right now, as its heartbeat says, in Redis: the fair queue hands out slots from it.

``qwenweb:node:<node>:ready`` is a hash, pool (profile name) -> ``"<slots> <model id>"``, that lives
``READY_TTL_S``: the node's heartbeat writes it every ``HEARTBEAT_S`` while its llama-server answers
and the profile's instance is loaded, so a node that stops (killed, frozen, cut off) drops out of
every pool by itself within ``READY_TTL_S``. A request that sees a node fail takes it out at once
(``mark_failed``); its heartbeat puts it back when it serves again. A loader that just brought a
revision live writes it at once (``mark_ready``), not at the next beat.
"""

from __future__ import annotations

import contextlib
import functools
import time

import orjson
import redis
from redis.commands.core import Script

from monitor.redis_clients import REDIS_DOWN, LoopRedis, sync_client

# A node leaves its pools within 5 s (issue 29): HEARTBEAT_S + heartbeat.ROUTER_TIMEOUT_S, or READY_TTL_S.
HEARTBEAT_S = 2.0
READY_TTL_S = 4
# A Redis up for less than this may not have heard every live node's beat since it started (empty).
REDIS_SETTLED_S = 3 * READY_TTL_S
# A remote profile's server has no heartbeat: what the app last read of it counts this long.
REMOTE_READY_TTL_S = 60
_redis = LoopRedis()


def ready_key(node: str) -> str:
    return f"qwenweb:node:{node}:ready"


def beat_key(node: str) -> str:
    """The node's last heartbeat (JSON: ``node``, ``at`` (epoch s), ``router`` (it answered), ``serving``
    (profile -> slots, served id)); it lives READY_TTL_S, so a node whose key is gone is down."""
    return f"qwenweb:node:{node}:beat"


def recover_key(node: str) -> str:
    """Model instances a request found frozen on the node: its heartbeat restarts them (model id -> why)."""
    return f"qwenweb:node:{node}:recover"


def parse_served(value: bytes | str) -> tuple[int, str]:
    text = value.decode() if isinstance(value, bytes) else value
    slots, _sep, model = text.partition(" ")
    return int(slots or 0), model


async def served_on(nodes: list[str], pool: str) -> dict[str, tuple[int, str]]:
    """The nodes of ``nodes`` that serve ``pool`` now: node -> (slots, model id). With Redis away
    (restarting), none is known: the caller finds out for itself, and the fair queue waits for Redis."""
    try:
        async with _redis.get().pipeline(transaction=False) as pipe:
            for node in nodes:
                pipe.hget(ready_key(node), pool)
            values = await pipe.execute()
    except REDIS_DOWN:
        return {}
    return {node: parse_served(value) for node, value in zip(nodes, values, strict=True) if value is not None}


async def left_pool(node: str, pool: str) -> bool:
    """Whether ``node`` is known to have left ``pool``: its heartbeat does not name it (gone with the node,
    or taken out by a request that saw it fail) in a Redis up for ``REDIS_SETTLED_S``. A Redis away, or
    restarted empty so recently that the node may not have beaten since, knows nothing of it: False."""
    try:
        client = _redis.get()
        if await client.hexists(ready_key(node), pool):
            return False
        return (await client.info("server"))["uptime_in_seconds"] >= REDIS_SETTLED_S
    except redis.RedisError:  # away, loading its data, refusing: it says nothing of the node
        return False


async def mark_ready(node: str, pool: str, slots: int, model: str, *, ttl_s: int = READY_TTL_S) -> None:
    """``node`` serves ``pool`` as ``model`` with ``slots`` slots (with Redis away, its heartbeat says so later)."""
    with contextlib.suppress(*REDIS_DOWN):
        async with _redis.get().pipeline(transaction=True) as pipe:
            pipe.hset(ready_key(node), pool, f"{slots} {model}")
            pipe.expire(ready_key(node), ttl_s)
            await pipe.execute()


async def mark_failed(node: str, pool: str | None = None) -> None:
    """The node (or only its instance for ``pool``) failed a request: no more slots there until its
    heartbeat says it serves again."""
    if pool is None:
        await _redis.get().delete(ready_key(node))
    else:
        await _redis.get().hdel(ready_key(node), pool)


_WITHDRAW = """
local served = redis.call('HGET', KEYS[1], ARGV[1])
if served and string.match(served, '^%d+ (.*)$') == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end
return 0
"""


async def withdraw(node: str, pool: str, model: str) -> None:
    """``model`` no longer serves ``pool`` on the node (unloaded): out of the pool, unless another
    revision already took its place."""
    await _redis.get().eval(_WITHDRAW, 1, ready_key(node), pool, model)


async def request_recovery(node: str, pool: str, model: str, reason: str) -> None:
    """A request found the instance frozen: out of the pool now, and its node's heartbeat restarts it."""
    async with _redis.get().pipeline(transaction=True) as pipe:
        pipe.hdel(ready_key(node), pool)
        pipe.hset(recover_key(node), model, reason)
        pipe.expire(recover_key(node), 600)
        await pipe.execute()


# A node's beat, in one call: what it serves replaces what it served, less any instance a request found
# frozen meanwhile (never published as serving until its node restarted it), and those requests are
# handed to the node, taken off its list. KEYS: ready, beat, recover; ARGV: the keys' life (s), node,
# time (epoch s), "1" when its router answered, then (pool, slots, served id) per pool it serves.
_BEAT = """
local recover = redis.call('HGETALL', KEYS[3])
local frozen = {}
for i = 1, #recover, 2 do frozen[recover[i]] = true end
redis.call('DEL', KEYS[1], KEYS[3])
local serving, any = {}, false
for i = 5, #ARGV, 3 do
  local pool, slots, model = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if not frozen[model] then
    redis.call('HSET', KEYS[1], pool, slots .. ' ' .. model)
    serving[pool] = {tonumber(slots), model}
    any = true
  end
end
if any then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
local beat = cjson.encode({node = ARGV[2], at = tonumber(ARGV[3]), router = ARGV[4] == '1', serving = serving})
redis.call('SET', KEYS[2], beat, 'EX', ARGV[1])
return recover
"""


@functools.cache
def _beat_script(client: redis.Redis) -> Script:
    """``_BEAT`` on ``client``, sent by its digest (EVALSHA; loaded again after a Redis restart)."""
    return client.register_script(_BEAT)


def publish(node: str, serving: dict[str, tuple[int, str]], *, router: bool = True) -> dict[str, str]:
    """A node's beat (its heartbeat's thread, or a stand-in node's in the tests): what the node serves now,
    less the instances requests found frozen; returns those (model id -> why), taken off the list, for the
    node to restart."""
    served = [value for pool, (slots, model) in serving.items() for value in (pool, slots, model)]
    keys = [ready_key(node), beat_key(node), recover_key(node)]
    arguments = [READY_TTL_S, node, repr(time.time()), "1" if router else "0", *served]
    answer = _beat_script(sync_client())(keys=keys, args=arguments)  # model id, why, ...
    return {model.decode(): why.decode() for model, why in zip(answer[::2], answer[1::2], strict=True)}


def withdraw_node(node: str) -> None:
    """The node stops (its supervisor exits): out of every pool now, and no beat."""
    sync_client().delete(ready_key(node), beat_key(node))


def beats(nodes: list[str]) -> dict[str, dict | None]:
    """Each node's last heartbeat (None: none within READY_TTL_S: the node is down)."""
    values = sync_client().mget([beat_key(node) for node in nodes]) if nodes else []
    return {node: orjson.loads(value) if value else None for node, value in zip(nodes, values, strict=True)}
