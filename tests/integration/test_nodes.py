"""A second inference node on this machine, joined with the documented command (`scripts/node.py`, what
`make node` runs), against the running main box (Daphne, Redis with its passwords, the database, the
real llama-server): tokens made and revoked on the staff page, refusals on the node's console and on the
page, the node's facts and heartbeat, a profile placed on it loaded by its own worker and answering a
chat turn, down and back, and removal cutting it off at once.

One node start serves the checks from the join to the removal (a module fixture); the tests run in
file order, the removal last.
"""

from __future__ import annotations

import os
import re
import signal
import stat
from pathlib import Path

import httpx
import psutil
import psycopg
import pytest
import redis
from django.db import connection

from monitor import tasks
from monitor.models import Event, JoinToken, Node, ServerProfile
from monitor.nodes import joining, membership, readiness
from monitor.nodes.registry import node_queue, place_on
from monitor.profiles.services import save_profile
from monitor.profiles.validation import validate_profile
from scripts.leftovers import processes_of_run
from scripts.local_services import sha256_file
from tests.support.client import base_url, chat_socket, events_until, login, make_user, send
from tests.support.joined_node import NodeRun, token_from_page
from tests.support.stack import wait_until

pytestmark = pytest.mark.usefixtures("web_server")
MODELS = Path(os.environ["QWENWEB_MODELS_DIR"])
GEMMA = "gemma-3-270m-q4_k_m.gguf"
TEMPLATE = (Path(__file__).resolve().parents[2] / "monitor" / "chat_templates" / "gemma3.jinja").read_text()
NODE = "node-b"
START_S = 300  # set-up as `make run` does it, the join, the node's programs up: on a busy 2-core box
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def post(http: httpx.Client, action: str, data: dict | None = None, page: str = "/monitor/nodes/") -> httpx.Response:
    """Submit a form as its page does: the page's CSRF token, the page as Referer."""
    token = CSRF.search(http.get(page).text).group(1)
    return http.post(
        action, data={**(data or {}), "csrfmiddlewaretoken": token}, headers={"Referer": base_url() + page}
    )


def new_token(staff: httpx.Client, note: str) -> str:
    """A join token made on the staff page (shown once, in the answer to the form)."""
    response = post(staff, "/monitor/nodes/tokens/", {"note": note, "hours": "24"})
    assert response.status_code == 201 and response.headers["Cache-Control"] == "no-store"
    assert f"make node MAIN={base_url()} TOKEN=" in response.text
    return token_from_page(response.text)


def node_row(staff: httpx.Client, name: str) -> str:
    """The node's row on the staff page ("" when it is not listed)."""
    found = re.search(rf'<tr data-node="{name}".*?</tr>', staff.get("/monitor/nodes/").text, re.S)
    return found.group(0) if found else ""


@pytest.fixture(scope="module")
def staff():
    return login(make_user(is_staff=True))


@pytest.fixture(scope="module")
def node_b(staff, tmp_path_factory):
    """node-b joined with a token made on the staff page, its heartbeat seen; its watchdog looks every 2 s."""
    node = NodeRun(tmp_path_factory.mktemp("node-b"), NODE, MODELS / GEMMA, env={"QWENWEB_WATCHDOG_INTERVAL_S": "2"})
    node.start(new_token(staff, "node-b"))
    try:
        wait_until(
            lambda: readiness.beats([NODE])[NODE], START_S, "node-b's heartbeat", node.process, node.console_path
        )
        yield node
    finally:
        node.stop()
        removed = Node.objects.filter(name=NODE).first()
        if removed is not None:  # the removal test did not run: take it back all the same
            joining.remove(removed)


def refused_start(token: str, tmp_path: Path) -> NodeRun:
    """node.py with ``token``, run to its end."""
    node = NodeRun(tmp_path, "node-refused", MODELS / GEMMA)
    node.start(token)
    try:  # until it ends, or joined after all (then it would run on: the test fails at once)
        wait_until(lambda: node.process.poll() is not None or "    joined;" in node.console(), START_S, "node.py")
        assert node.process.poll() == 1, node.console()
    finally:
        node.stop()
    return node


def test_a_wrong_token_is_refused_on_the_nodes_console_and_on_the_staff_page(staff, tmp_path):
    node = refused_start("qwn-join-not-a-token", tmp_path)
    assert "refused this node: This join token is not known here." in node.console()
    assert not Node.objects.filter(name="node-refused").exists()
    assert not membership.path_of(node.var_dir).exists()  # nothing saved: no credentials came
    refusals = re.search(r'<table class="grid" id="refusals">.*?</table>', staff.get("/monitor/nodes/").text, re.S)
    assert "node-refused" in refusals.group(0) and "127.0.0.1" in refusals.group(0)
    assert "This join token is not known here." in refusals.group(0)


def test_a_revoked_token_is_refused_and_no_longer_listed(staff, tmp_path):
    token = new_token(staff, "to revoke")
    row = JoinToken.objects.get(note="to revoke")
    assert f'data-token="{row.pk}"' in staff.get("/monitor/nodes/").text
    assert token not in staff.get("/monitor/nodes/").text  # shown once: the list never shows it again
    post(staff, f"/monitor/nodes/tokens/{row.pk}/revoke/")
    assert f'data-token="{row.pk}"' not in staff.get("/monitor/nodes/").text
    node = refused_start(token, tmp_path)
    assert "refused this node: This join token was revoked by staff." in node.console()
    refusals = staff.get("/monitor/nodes/").text
    assert "This join token was revoked by staff." in refusals.split('id="refusals"')[1]
    with httpx.Client(base_url=base_url(), headers={"Accept-Language": "zh-hans"}) as chinese:
        answer = chinese.post("/nodes/join/", json={"token": token, "name": "box-c", "url": "http://h:1", "facts": {}})
    assert answer.status_code == 400  # no facts: refused before the token is looked at, in the node's language
    assert "facts" in answer.json()["error"]


FACTS = {"gpus": [], "gpu_note": "test", "ram_bytes": 1, "cpu_cores": 1, "llama_server": "", "models": []}


def test_a_name_in_use_is_refused_and_leaves_the_token_unused(staff):
    token = new_token(staff, "name in use")
    taken = Node.objects.get(is_local=True).name
    answer = httpx.post(
        base_url() + "/nodes/join/", json={"token": token, "name": taken, "url": "http://127.0.0.1:1", "facts": FACTS}
    )
    assert answer.status_code == 403 and f"A node named {taken} already exists." in answer.json()["error"]
    assert JoinToken.objects.get(note="name in use").used_at is None
    assert Node.objects.filter(name=taken).count() == 1


def forget_attempts() -> None:
    counters = redis.Redis.from_url(os.environ["REDIS_URL"])
    for key in counters.scan_iter("qwenweb:node-joins:*"):
        counters.delete(key)


def test_attempts_from_one_address_are_limited():
    forget_attempts()  # the other tests' joins from this address
    try:
        with httpx.Client(base_url=base_url()) as http:
            answers = [http.post("/nodes/join/", json={"token": "x", "name": "b", "url": "http://h:1", "facts": FACTS})]
            answers += [http.post("/nodes/check/", json={"name": "b"}) for _ in range(25)]
        statuses = [answer.status_code for answer in answers]
        assert statuses[:20] == [403] * 20 and set(statuses[20:]) == {429}, statuses
        assert "at most 20 an hour" in answers[-1].json()["error"]
        assert Event.objects.filter(kind=Event.Kind.NODE_REFUSED, details__reason="too_many").count() == 1
    finally:
        forget_attempts()


def test_non_staff_get_403_on_the_nodes_page_and_its_actions():
    person = login(make_user())
    anonymous = httpx.Client(base_url=base_url())
    for client in (person, anonymous):
        assert client.get("/monitor/nodes/").status_code == 403
        assert client.get(f"/monitor/nodes/{Node.objects.get(is_local=True).pk}/remove/").status_code == 403
    token = person.cookies["csrftoken"]
    for action in ("/monitor/nodes/tokens/", f"/monitor/nodes/{Node.objects.get(is_local=True).pk}/remove/"):
        response = person.post(action, data={"csrfmiddlewaretoken": token, "note": "x", "hours": "1"})
        assert response.status_code == 403 and "staff" in response.text.lower(), action
    assert not JoinToken.objects.filter(note="x").exists() and Node.objects.filter(is_local=True).exists()


def test_the_node_joins_registers_its_facts_and_beats(staff, node_b):
    row = node_row(staff, NODE)
    assert "up (heartbeat" in row
    assert GEMMA in row and sha256_file(MODELS / GEMMA) in row  # its models, with their SHA256
    assert "version:" in row  # llama-server's build, from its --version
    assert f"http://127.0.0.1:{node_b.port}" in row
    node = Node.objects.get(name=NODE)
    assert node.facts["cpu_cores"] >= 1 and node.facts["ram_bytes"] > 0 and node.registered_at
    assert node.facts["gpus"] or node.facts["gpu_note"]  # none on a machine without NVIDIA: it says why
    token = JoinToken.objects.get(node=node)
    assert token.used_at and f'data-token="{token.pk}"' not in staff.get("/monitor/nodes/").text
    saved = membership.load(node_b.var_dir)
    assert stat.S_IMODE(membership.path_of(node_b.var_dir).stat().st_mode) == 0o600
    assert saved.redis["username"] == f"qwenweb-node-{NODE}" and node.redis_user == saved.redis["username"]
    assert saved.llama_api_key == node.api_key and saved.llama_api_key not in staff.get("/monitor/nodes/").text
    assert "==> joining" in node_b.console() and "refused" not in node_b.console()
    if connection.vendor == "postgresql":
        assert saved.database["user"] == f"qwenweb-node-{NODE}"  # a role of its own, dropped at removal


@pytest.fixture
def profile_on_b(node_b):
    profile = ServerProfile(
        name="on-b", model_file=GEMMA, ctx_size=2048, parallel=1, threads=2, chat_template_jinja=TEMPLATE
    )
    validate_profile(profile)
    save_profile(profile)
    place_on(profile, [Node.objects.get(name=NODE)])
    yield profile
    tasks.unload_profile.apply_async(("on-b",), queue=node_queue(NODE)).get(timeout=60)
    ServerProfile.objects.filter(pk=profile.pk).delete()


def test_the_node_s_own_watchdog_loads_a_startup_profile_again_when_its_instance_died(llama, node_b, profile_on_b):
    """Each node watches its own router from its llama-server supervisor (its heartbeat's model list,
    read by its watchdog every QWENWEB_WATCHDOG_INTERVAL_S): no task from the main box, no worker."""
    ServerProfile.objects.filter(pk=profile_on_b.pk).update(load_on_startup=True)
    result = tasks.load_profile.apply_async((profile_on_b.pk,), queue=node_queue(NODE)).get(timeout=180)
    assert result["ok"] and result["node"] == NODE, result
    router = psutil.Process(int((node_b.var_dir / "run" / "llama-router.pid").read_text()))
    instance = next(child for child in router.children() if "on-b@1" in " ".join(child.cmdline()))
    instance.kill()
    reloaded = Event.objects.filter(kind=Event.Kind.SERVER_RESTARTED, profile="on-b")
    wait_until(reloaded.exists, 60, "node-b's watchdog to see the instance die")
    assert "on-b stopped (exit code" in reloaded.get().message and "watchdog loads it again" in reloaded.get().message
    serving = lambda: "on-b" in (readiness.beats([NODE])[NODE] or {}).get("serving", {})  # noqa: E731
    wait_until(serving, 120, "on-b served by node-b again")
    assert "on-b@1" not in llama.models()  # node-b's router loaded it, not the main box's


def test_a_profile_placed_on_the_node_is_loaded_by_its_own_worker_and_answers_a_turn(llama, node_b, profile_on_b):
    result = tasks.load_profile.apply_async((profile_on_b.pk,), queue=node_queue(NODE)).get(timeout=180)
    assert result["ok"] and result["node"] == NODE, result  # the node's own worker took the job
    wait_until(lambda: "on-b" in (readiness.beats([NODE])[NODE] or {}).get("serving", {}), 30, "on-b on node-b")
    assert "on-b@1" not in llama.models()  # the main box's router never loaded it

    node = Node.objects.get(name=NODE)
    headers = {"Authorization": f"Bearer {node.api_key}"}
    metrics = httpx.get(f"{node.url}/metrics", params={"model": "on-b@1"}, headers=headers, timeout=10).text
    before = float(re.search(r"^llamacpp:tokens_predicted_total (\S+)$", metrics, re.M).group(1))
    with chat_socket(login(make_user())) as ws:
        send(ws, type="send", text="Say hi.", options={"seed": 5, "max_tokens": 8}, profile="on-b")
        events_until(ws, "accepted")
        done = events_until(ws)[-1]
    assert done["status"] == "complete", done
    metrics = httpx.get(f"{node.url}/metrics", params={"model": "on-b@1"}, headers=headers, timeout=10).text
    assert float(re.search(r"^llamacpp:tokens_predicted_total (\S+)$", metrics, re.M).group(1)) > before
    assert httpx.get(f"{node.url}/models", timeout=10).status_code == 401  # its router wants its key


def test_make_stop_stops_the_node_and_it_comes_back_with_what_it_saved(staff, node_b):
    """`make stop` on the node's box stops all of it; `make node` again needs no token: it registers
    its facts again with the credential it saved, and beats again."""
    before = Node.objects.get(name=NODE).registered_at
    stopped = node_b.make_stop()
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert node_b.wait(60) == 0
    assert processes_of_run(node_b.var_dir) == []  # nothing of the node left running
    node_b.start()  # no MAIN, no TOKEN
    wait_until(lambda: readiness.beats([NODE])[NODE], START_S, "node-b's heartbeat again", node_b.process)
    assert f"==> registering with {base_url()} as {NODE}" in node_b.console()
    assert Node.objects.get(name=NODE).registered_at > before
    assert Event.objects.filter(kind=Event.Kind.NODE_UP, node=NODE).exists()
    assert "up (heartbeat" in node_row(staff, NODE)


def test_a_node_that_stops_answering_is_shown_down_within_15_s_and_comes_back_by_itself(staff, node_b):
    wait_until(lambda: "up (heartbeat" in node_row(staff, NODE), 30, "node-b up")
    supervisor = node_b.llama_supervisor_pid()
    os.kill(supervisor, signal.SIGSTOP)  # frozen: no beat, nothing exits
    try:
        wait_until(lambda: "down (no heartbeat)" in node_row(staff, NODE), 15, "node-b shown down")
    finally:
        os.kill(supervisor, signal.SIGCONT)
    wait_until(lambda: "up (heartbeat" in node_row(staff, NODE), 30, "node-b back")  # no restart of the main box


def test_a_removed_node_is_cut_off_at_once_and_its_console_says_why(staff, node_b):
    saved = membership.load(node_b.var_dir)
    node_redis = redis.Redis.from_url(saved.redis_url(), socket_timeout=5)
    assert node_redis.ping()  # its own user works while it is a member
    page = staff.get(f"/monitor/nodes/{Node.objects.get(name=NODE).pk}/remove/").text
    assert "Remove node node-b?" in page
    response = post(staff, f"/monitor/nodes/{Node.objects.get(name=NODE).pk}/remove/", page="/monitor/nodes/")
    assert "Node node-b removed" in response.text
    with pytest.raises(redis.AuthenticationError):
        redis.Redis.from_url(saved.redis_url(), socket_timeout=5).ping()  # its Redis user is gone
    with pytest.raises(redis.RedisError):
        node_redis.ping()  # and its open connection was closed
    assert not Node.objects.filter(name=NODE).exists() and node_row(staff, NODE) == ""
    assert readiness.beats([NODE])[NODE] is None  # out of every pool now
    assert node_b.wait(60) == 1  # it stopped itself
    removed = membership.removed_message(base_url(), "")
    assert removed in node_b.console(), node_b.console()[-3000:]
    assert removed in (node_b.var_dir / "log" / "llama.log").read_text()
    assert "Traceback" not in node_b.console()
    answer = httpx.post(
        base_url() + "/nodes/register/",
        json={"name": NODE, "url": saved.url, "facts": {"ram_bytes": 1, "cpu_cores": 1}},
        headers={"Authorization": f"Bearer {saved.credential}"},
    )
    assert answer.status_code == 403 and "removed" in answer.json()["error"]  # its credential no longer works
    if connection.vendor == "postgresql":
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(saved.database_url().replace("postgres://", "postgresql://"), connect_timeout=5)
