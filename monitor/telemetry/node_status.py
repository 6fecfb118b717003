"""Every inference node as the main box sees it: alive or not, what it serves, its sampler's newest
figures; and the timeline's record of nodes going down and coming back.

A node lives while its heartbeat key does (``monitor.nodes.readiness.beat_key``: written every
``HEARTBEAT_S`` by its llama-server supervisor, gone ``READY_TTL_S`` after the last one), so the
dashboard and the health page, which read it on every look, show a node down READY_TTL_S after its
last beat (4 s, so 4-5.5 s after it stopped).
A beat's age is the time its key has lived (``READY_TTL_S`` minus what it has left), by Redis's
clock: the boxes' own clocks may differ.

The main box's sampler checks every node every ``NODE_CHECK_S`` (``NodeWatch``) and records
NODE_DOWN and NODE_UP on the timeline once per transition, so a node that dies while people chat is
there within READY_TTL_S + NODE_CHECK_S + a beat (11 s). A check is one round trip that reads; what
it last saw of each node is kept in Redis (``STATE_KEY``), written only when a node changes, and only
where it still holds what the check read (compare and set): a restarted sampler, or two for a
moment, record no transition twice. A node seen for the first time (a new node, or the state lost
with Redis) is recorded silently. When each check ran is in ``CHECKED_KEY``.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import orjson
import redis
from asgiref.sync import sync_to_async
from django.conf import settings
from django.utils.translation import gettext as _

from monitor import timeline
from monitor.models import Event, Node
from monitor.nodes import readiness
from monitor.redis_clients import sync_client
from monitor.telemetry.live import live_key

NODE_CHECK_S = 5.0
STATE_KEY = "qwenweb:monitor:node-state"
CHECKED_KEY = "qwenweb:monitor:node-check"  # the time (epoch s) of the last check
# The node's newest sample counts while younger than this: its sampler writes one every idle interval
# while no dashboard is open (every second while one is), so an older one means its sampler stopped.
SAMPLE_FRESH_S = settings.MONITOR_IDLE_SAMPLE_INTERVAL_S + 3.0

# KEYS[1]: STATE_KEY; ARGV: (node, the state the check read or "", the new state or "" to drop) ...
# Returns the nodes whose state was still what the check read, now changed.
_COMPARE_AND_SET = """
local changed = {}
for i = 1, #ARGV, 3 do
  local current = redis.call('HGET', KEYS[1], ARGV[i]) or ''
  if current == ARGV[i + 1] then
    if ARGV[i + 2] == '' then redis.call('HDEL', KEYS[1], ARGV[i]) else redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 2]) end
    table.insert(changed, ARGV[i])
  end
end
return changed
"""


@dataclass(frozen=True)
class Beat:
    """A node's heartbeat as Redis holds it now; ``up`` False: none within READY_TTL_S."""

    up: bool
    age_s: float | None = None
    router: bool = False  # its llama-server router answered that beat
    serving: dict[str, tuple[int, str]] = field(default_factory=dict)  # profile -> (slots, served id)


@dataclass(frozen=True)
class NodeState:
    """What the main box last saw of a node (its own clock): up or down since when, and when the node's
    last heartbeat was (None: never seen beating)."""

    up: bool
    since: float
    seen: float | None


@dataclass(frozen=True)
class Transition:
    """A node went down (``silent_s``: since its last heartbeat) or came back (``silent_s``: how long it
    was down; None: it beats for the first time)."""

    node: str
    up: bool
    silent_s: float | None


def main_node() -> str:
    """The main box's node (the web server and this dashboard run there)."""
    return Node.objects.filter(is_local=True).values_list("name", flat=True).first() or settings.NODE_NAME


def node_rows() -> list[dict]:
    """Every node in the database, the main box's first: its name and whether it is the main box's."""
    return [{"name": name, "is_local": is_local} for name, is_local in Node.objects.values_list("name", "is_local")]


def add_beat_reads(pipe, names: list[str]) -> None:
    """Queue, on a pipeline (blocking or asyncio), the reads ``beats_from`` parses."""
    for name in names:
        pipe.get(readiness.beat_key(name))
        pipe.pttl(readiness.beat_key(name))


def beats_from(names: list[str], replies: list) -> dict[str, Beat]:
    """The replies to ``add_beat_reads``, in order, as each node's Beat. A beat is what the node wrote:
    anything of another shape is left out, not trusted."""
    found: dict[str, Beat] = {}
    for index, name in enumerate(names):
        raw, pttl_ms = replies[2 * index], replies[2 * index + 1]
        try:
            beat = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            beat = None
        if not isinstance(beat, dict):
            found[name] = Beat(False)
            continue
        age = max(0.0, readiness.READY_TTL_S - pttl_ms / 1000) if isinstance(pttl_ms, int) and pttl_ms >= 0 else None
        found[name] = Beat(True, None if age is None else round(age, 1), beat.get("router") is True, _serving(beat))
    return found


def _serving(beat: dict) -> dict[str, tuple[int, str]]:
    serving = beat.get("serving")
    if not isinstance(serving, dict):
        return {}
    valid = {}
    for pool, served in serving.items():
        if isinstance(served, list) and len(served) == 2 and isinstance(served[0], int) and isinstance(served[1], str):
            valid[str(pool)] = (served[0], served[1])
    return valid


def states_from(replies: dict) -> dict[str, tuple[NodeState, bytes]]:
    """STATE_KEY's hash as each node's state, with the stored value (what a compare and set compares)."""
    states = {}
    for name, raw in replies.items():
        try:
            states[name.decode()] = (NodeState(**orjson.loads(raw)), raw)
        except (orjson.JSONDecodeError, TypeError):
            continue  # another version's shape: seen again as new
    return states


def plan(
    names: list[str], beats: dict[str, Beat], states: dict[str, NodeState], now: float, seen: dict[str, float]
) -> tuple[dict[str, NodeState | None], list[Transition]]:
    """What one check changes: each node's new state (None: drop a node no longer in the database) and
    the transitions to record; a node seen for the first time is recorded silently. ``seen``: when each
    node's last heartbeat was, as the checks so far saw it (kept by the caller, updated here), so that
    a node that stays as it was costs no write."""
    writes: dict[str, NodeState | None] = {name: None for name in states if name not in names}
    transitions = []
    for name in names:
        beat = beats.get(name, Beat(False))
        old = states.get(name)
        last = max(seen.get(name, 0.0), old.seen or 0.0) if old else seen.get(name)  # before this check
        if beat.up:
            seen[name] = now - (beat.age_s or 0.0)
        if old is None:
            writes[name] = NodeState(beat.up, now, seen.get(name))
        elif old.up != beat.up:
            writes[name] = NodeState(beat.up, now, seen.get(name))
            # Since its last heartbeat before this one (None when up: it never beat before).
            silent = None if not last else (seen[name] if beat.up else now) - last
            transitions.append(Transition(name, beat.up, silent))
    return writes, transitions


def record(transition: Transition) -> Event | None:
    """The transition on the timeline (none for a node that has left the database since the check's list)."""
    if not Node.objects.filter(name=transition.node).exists():
        return None
    seconds = round(transition.silent_s or 0)
    if not transition.up:
        message = _("Node %(name)s stopped answering: no heartbeat for %(seconds)d s.")
    elif transition.silent_s is None:
        message = _("Node %(name)s answers: its first heartbeat.")
    else:
        message = _("Node %(name)s answers again, after %(seconds)d s down.")
    kind, level = (Event.Kind.NODE_UP, Event.Level.INFO) if transition.up else (Event.Kind.NODE_DOWN, Event.Level.ERROR)
    return timeline.record(
        kind, message % {"name": transition.node, "seconds": seconds}, level=level, node=transition.node,
        silent_s=None if transition.silent_s is None else round(transition.silent_s, 1),
    )  # fmt: skip


class NodeWatch:
    """The main box's check of every node's heartbeat (run by its sampler, see ``sampler.run_forever``)."""

    def __init__(self, redis) -> None:
        self.redis = redis
        self.nodes: list[str] = []  # the nodes in the database, set by the sampler as it refreshes its targets
        self.due = 0.0  # time.monotonic() of the next check
        self.seen: dict[str, float] = {}  # each node's last heartbeat seen (see ``plan``)
        self._compare_and_set = redis.register_script(_COMPARE_AND_SET)

    async def check(self, now: float | None = None) -> list[Transition]:
        """Read every node's beat, store what changed and record the transitions this check made."""
        self.due = time.monotonic() + NODE_CHECK_S
        now = time.time() if now is None else now
        names = list(self.nodes)
        pipe = self.redis.pipeline(transaction=False)
        add_beat_reads(pipe, names)
        pipe.hgetall(STATE_KEY)
        pipe.set(CHECKED_KEY, now)
        *replies, stored, _checked = await pipe.execute()
        states = states_from(stored)
        beats = beats_from(names, replies)
        writes, transitions = plan(names, beats, {n: s for n, (s, _raw) in states.items()}, now, self.seen)
        if not writes:
            return []
        args: list = []
        for name, state in writes.items():
            old = states.get(name)
            args += [name, old[1] if old else b"", orjson.dumps(asdict(state)) if state else b""]
        changed = {name.decode() for name in await self._compare_and_set(keys=[STATE_KEY], args=args)}
        made = [transition for transition in transitions if transition.node in changed]
        for transition in made:
            await sync_to_async(record)(transition)
        return made


def add_live_reads(pipe, names: list[str]) -> None:
    """Queue, on a pipeline, what a look at every node reads: its newest sample, its beat, the states."""
    for name in names:
        pipe.lindex(live_key(name), 0)
    add_beat_reads(pipe, names)
    pipe.hgetall(STATE_KEY)


def newest_samples(names: list[str]) -> dict[str, dict | None]:
    """Each node's newest sample, for a page that plans from what the nodes have free now (the planner);
    nothing where Redis does not answer: the page then plans from the nodes' registered totals."""
    pipe = sync_client().pipeline(transaction=False)
    for name in names:
        pipe.lindex(live_key(name), 0)
    try:
        replies = pipe.execute()
    except redis.RedisError:
        return {}
    return {name: orjson.loads(raw) for name, raw in zip(names, replies, strict=True) if raw}


def live_from(names: list[str], replies: list) -> tuple[dict[str, dict | None], dict[str, Beat], dict[str, NodeState]]:
    """The replies to ``add_live_reads``, in order: each node's newest sample, beat and state."""
    count = len(names)
    samples = {name: orjson.loads(raw) if raw else None for name, raw in zip(names, replies[:count], strict=True)}
    beats = beats_from(names, replies[count : 3 * count])
    states = {name: state for name, (state, _raw) in states_from(replies[3 * count]).items()}
    return samples, beats, states


def _silent_s(state: NodeState | None, now: float) -> float | None:
    """A node that is down: seconds since its last heartbeat (None: the main box never saw one). Until
    the check records it down (within NODE_CHECK_S) its beat has just run out: READY_TTL_S ago."""
    if state is None or state.seen is None:
        return None
    return round(now - state.seen, 1) if not state.up else float(readiness.READY_TTL_S)


def node_views(
    nodes: list[dict], beats: dict[str, Beat], states: dict[str, NodeState], samples: dict[str, dict | None],
    now: float,
) -> list[dict]:  # fmt: skip
    """Each node as the dashboard's card and the health page show it: up or down (with its last heartbeat),
    what it serves, and its sampler's newest figures while they are fresh."""
    views = []
    for node in nodes:
        name = node["name"]
        beat = beats.get(name, Beat(False))
        state = states.get(name)
        sample = samples.get(name)
        fresh = sample if sample and now - sample.get("t", 0) <= SAMPLE_FRESH_S else None
        views.append(
            {
                "name": name,
                "is_local": node["is_local"],
                "up": beat.up,
                "beat_age_s": beat.age_s,
                "router": beat.router,
                "serving": [
                    {"profile": pool, "slots": slots, "model": model}
                    for pool, (slots, model) in sorted(beat.serving.items())
                ],
                "silent_s": None if beat.up else _silent_s(state, now),
                "down_since": None if beat.up or state is None or state.up else state.since,
                "recorded_up": None if state is None else state.up,  # as the timeline has it
                "sample_age_s": round(now - fresh["t"], 1) if fresh else None,
                "host": fresh.get("host") if fresh else None,
                "gpu": fresh.get("gpu") if fresh else None,
                "servers": fresh.get("servers") if fresh else [],
            }
        )
    return views
