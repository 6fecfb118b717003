"""How the main box reads the nodes' heartbeats and decides what changed (no service: the Redis replies
are given as Redis gives them). The real heartbeats, sampler and timeline: tests/integration/test_nodes_view.py."""

import orjson

from monitor.nodes.readiness import HEARTBEAT_S, READY_TTL_S
from monitor.router.heartbeat import ROUTER_TIMEOUT_S
from monitor.telemetry.node_status import Beat, NodeState, Transition, beats_from, node_views, plan


def test_the_heartbeats_clock_keeps_issue_29s_five_seconds():
    """A frozen router is withdrawn by the next beat once its request gives up (HEARTBEAT_S + the limit);
    a node whose processes died, when its keys run out (READY_TTL_S): both within 5 s. And a router that
    answers within the limit always beats again before its keys run out (no flapping under load)."""
    assert HEARTBEAT_S + ROUTER_TIMEOUT_S < READY_TTL_S <= 5


def test_a_beat_is_read_with_its_age_from_the_time_its_key_has_left():
    beat = orjson.dumps({"node": "a", "at": 1.0, "router": True, "serving": {"chat-8k": [2, "chat-8k@1"]}})
    beats = beats_from(["a", "b"], [beat, READY_TTL_S * 1000 - 1500, None, -2])
    assert beats["a"] == Beat(True, 1.5, True, {"chat-8k": (2, "chat-8k@1")})
    assert beats["b"] == Beat(False)


def test_a_beat_of_another_shape_is_not_trusted():
    left_ms = READY_TTL_S * 1000 - 3000  # a beat 3 s old
    odd = [
        b"not json",
        left_ms,
        orjson.dumps([1, 2]),
        left_ms,
        orjson.dumps({"router": "yes", "serving": {"p": [1]}}),
        left_ms,
    ]
    beats = beats_from(["x", "y", "z"], odd)
    assert beats["x"] == Beat(False) and beats["y"] == Beat(False)
    assert beats["z"] == Beat(True, 3.0, False, {})  # alive, but "yes" is no router answer and [1] no slot count


def test_first_sight_is_silent_then_each_transition_is_recorded_once_and_nothing_else_is_written():
    up = {"a": Beat(True, 1.0, True)}
    down = {"a": Beat(False)}
    seen: dict[str, float] = {}
    writes, transitions = plan(["a"], up, {}, 100.0, seen)
    assert transitions == [] and writes == {"a": NodeState(True, 100.0, 99.0)}
    state = writes["a"]
    assert plan(["a"], up, {"a": state}, 105.0, seen) == ({}, [])  # still up: nothing to write
    assert seen == {"a": 104.0}  # its last heartbeat, as the checks see it
    writes, transitions = plan(["a"], down, {"a": state}, 112.0, seen)
    assert transitions == [Transition("a", False, 8.0)]  # since its last heartbeat seen
    assert writes == {"a": NodeState(False, 112.0, 104.0)}
    state = writes["a"]
    assert plan(["a"], down, {"a": state}, 117.0, seen) == ({}, [])  # still down: nothing to write or record
    writes, transitions = plan(["a"], {"a": Beat(True, 0.5, True)}, {"a": state}, 130.0, seen)
    assert transitions == [Transition("a", True, 25.5)]  # silent from 104.0 to 129.5
    assert writes == {"a": NodeState(True, 130.0, 129.5)}


def test_a_restarted_check_takes_the_last_heartbeat_from_the_stored_state():
    state = NodeState(False, 112.0, 104.0)  # recorded down by the sampler before this one
    writes, transitions = plan(["a"], {"a": Beat(True, 0.0, True)}, {"a": state}, 200.0, {})
    assert transitions == [Transition("a", True, 96.0)]


def test_a_node_that_beats_for_the_first_time_and_a_node_gone_from_the_database():
    never = NodeState(False, 50.0, None)
    writes, transitions = plan(["new"], {"new": Beat(True, 0.0, True)}, {"new": never, "removed": never}, 60.0, {})
    assert transitions == [Transition("new", True, None)]
    assert writes == {"removed": None, "new": NodeState(True, 60.0, 60.0)}


def test_the_node_cards_data():
    nodes = [{"name": "main", "is_local": True}, {"name": "<b>x</b>", "is_local": False}]
    nodes += [{"name": "late", "is_local": False}, {"name": "never", "is_local": False}]
    beats = {"main": Beat(True, 0.7, True, {"chat-8k": (2, "chat-8k@1")}), "<b>x</b>": Beat(False)}
    states = {"<b>x</b>": NodeState(False, 90.0, 80.0), "late": NodeState(True, 10.0, 20.0)}
    sample = {"t": 99.0, "host": {"cpu_pct": 3.0}, "gpu": {"available": False, "gpus": []}, "servers": []}
    old_sample = {"t": 10.0, "host": {}, "gpu": {}, "servers": []}
    main, other, late, never = node_views(nodes, beats, states, {"main": sample, "<b>x</b>": old_sample}, now=100.0)
    assert main["up"] and main["beat_age_s"] == 0.7 and main["router"]
    assert main["serving"] == [{"profile": "chat-8k", "slots": 2, "model": "chat-8k@1"}]
    assert main["sample_age_s"] == 1.0 and main["host"] == {"cpu_pct": 3.0}
    assert other["name"] == "<b>x</b>" and not other["up"]
    assert other["silent_s"] == 20.0 and other["down_since"] == 90.0
    assert other["sample_age_s"] is None and other["host"] is None  # its sampler's newest is too old to show
    # Down, but not yet recorded so by the check: its beat has just run out, READY_TTL_S ago.
    assert not late["up"] and late["silent_s"] == READY_TTL_S and late["down_since"] is None
    assert not never["up"] and never["silent_s"] is None
