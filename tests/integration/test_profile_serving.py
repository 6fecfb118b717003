"""Profiles served by llama-server's router: safe changes, failed loads, restarts, remote backends, 403s.

Everything here runs against the product's own llama-server (the supervisor started by
the ``llama`` fixture, router mode, one instance per loaded profile).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import time
from pathlib import Path

import httpx
import psutil
import pytest
from asgiref.sync import async_to_sync

from monitor.models import Event, ServerProfile
from monitor.nodes.registry import placement_here
from monitor.profiles.errors import LoadFailed
from monitor.profiles.loading import load_profile
from monitor.profiles.presets import live_id, served_id
from monitor.profiles.selectors import find_profile
from monitor.profiles.services import save_profile
from monitor.profiles.validation import validate_profile
from tests.support import stack
from tests.support.client import chat_socket, events_until, login, make_user, send

MODELS = Path(os.environ["QWENWEB_MODELS_DIR"])
GEMMA = "gemma-3-270m-q4_k_m.gguf"
TEMPLATE = (Path(__file__).resolve().parents[2] / "monitor" / "chat_templates" / "gemma3.jinja").read_text()
SHORT = {"seed": 5, "max_tokens": 12}
pytestmark = pytest.mark.usefixtures("web_server", "celery_worker")


def new_profile(name: str, **changes) -> ServerProfile:
    profile = ServerProfile(
        name=name, model_file=GEMMA, ctx_size=4096, parallel=1, threads=2, chat_template_jinja=TEMPLATE
    )
    for key, value in changes.items():
        setattr(profile, key, value)
    validate_profile(profile)
    save_profile(profile)
    return profile


def router_state(llama, model_id: str) -> dict:
    return llama.models().get(model_id, {})


def chat_once(http, profile: str | None = None, text: str = "Say hi.") -> dict:
    with chat_socket(http) as ws:
        send(ws, type="send", text=text, options=SHORT, **({"profile": profile} if profile else {}))
        events_until(ws, "accepted")
        return events_until(ws)[-1]


def wait_for(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = check()
        except (httpx.HTTPError, OSError):  # not up yet
            value = None
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what} did not happen within {timeout}s")


@pytest.fixture
def staff():
    return login(make_user(is_staff=True))


def post(http, url: str, **data):
    return http.post(url, data={"csrfmiddlewaretoken": http.cookies["csrftoken"], **data})


def test_corrupt_model_fails_to_load_and_the_serving_profile_keeps_answering(llama, staff):
    default_id = llama.model_id
    assert router_state(llama, default_id)["value"] == "loaded"
    broken = MODELS / "broken-copy.gguf"
    shutil.copyfile(MODELS / GEMMA, broken)
    profile = new_profile("broken", model_file=broken.name)
    # The file breaks after the profile was saved (a bad copy, a disk error): cut it short.
    with broken.open("r+b") as handle:
        handle.truncate(60 * 1024 * 1024)
    try:
        response = post(staff, f"/monitor/profiles/{profile.pk}/load/", back="detail")
        assert response.status_code == 200
        status = wait_for(
            lambda: (
                next(
                    (p for p in staff.get("/monitor/profiles/status.json").json()["profiles"] if p["name"] == "broken"),
                    {},
                ).get("state")
                == "failed"
            ),
            60,
            "the failure",
        )
        assert status
        event = wait_for(
            lambda: Event.objects.filter(profile="broken", kind=Event.Kind.PROFILE_FAILED).first(), 10, "the event"
        )
        assert "broken@1 failed to load" in event.message
        assert event.details["log_tail"], event.details
        page = staff.get(f"/monitor/profiles/{profile.pk}/").text
        assert "failed to load" in page
        assert re.search(r"error loading model|failed to load model|data is not within the file bounds", page)
        # The profile that was serving never stopped.
        assert router_state(llama, default_id)["value"] == "loaded"
        done = chat_once(login(make_user()))
        assert done["status"] == "complete", done
    finally:
        broken.unlink(missing_ok=True)
        ServerProfile.objects.filter(pk=profile.pk).delete()


def here(profile: ServerProfile):
    """The profile's placement on this box's node, as stored now."""
    return placement_here(profile)


def test_a_change_that_fails_keeps_the_old_settings_serving_then_a_good_change_goes_live(llama):
    profile = new_profile("safe-change", ctx_size=2048)
    user_http = login(make_user())
    try:
        async_to_sync(load_profile)(profile)
        assert here(profile).live_revision == 1 and router_state(llama, "safe-change@1")["value"] == "loaded"

        # A bad option (a LoRA adapter in the models folder that is no adapter) passes the form but not llama-server.
        (MODELS / "not-an-adapter.gguf").write_bytes(b"GGUF" + b"\0" * 64)
        profile.extra_args = "--lora not-an-adapter.gguf"
        validate_profile(profile)
        assert save_profile(profile) and profile.revision == 2
        with pytest.raises(LoadFailed) as failed:
            async_to_sync(load_profile)(profile)
        assert "safe-change@2 failed to load" in str(failed.value)
        assert here(profile).live_revision == 1
        assert "safe-change@2 failed to load" in here(profile).error  # the node says why
        assert router_state(llama, "safe-change@1")["value"] == "loaded"
        assert live_id(profile, here(profile)) == "safe-change@1"
        done = chat_once(user_http, "safe-change")
        assert done["status"] == "complete", done

        # A good change (a larger context) loads beside it, goes live, and the old one goes.
        profile.extra_args = ""
        profile.ctx_size = 3072
        save_profile(profile)
        async_to_sync(load_profile)(profile)
        profile.refresh_from_db()
        new_id = served_id("safe-change", profile.revision)
        assert here(profile).live_revision == profile.revision and live_id(profile, here(profile)) == new_id
        assert here(profile).error == ""
        props = httpx.get(llama.url + "/props", params={"model": new_id}, headers=llama.headers).json()
        assert props["default_generation_settings"]["n_ctx"] == 3072
        assert router_state(llama, "safe-change@1").get("value") in (None, "unloaded")
        assert chat_once(user_http, "safe-change")["status"] == "complete"
    finally:
        ServerProfile.objects.filter(pk=profile.pk).delete()
        (MODELS / "not-an-adapter.gguf").unlink(missing_ok=True)


def test_switching_back_at_once_loads_again_what_the_last_switch_unloaded(llama):
    """A switch unloads the instance it replaces (one at a time here) and returns once it is gone: the
    router's unload only asks it to stop, and a switch back asked meanwhile found it still "loaded",
    skipped the load, and its first request was refused (bench/profile_bench.py did, on a loaded box)."""
    default = find_profile()
    default_id = live_id(default, here(default))
    other = new_profile("switch-back")
    try:
        async_to_sync(load_profile)(other)
        assert router_state(llama, default_id).get("value") in (None, "unloaded")
        async_to_sync(load_profile)(default)
        body = {"model": default_id, "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 2}
        answer = httpx.post(llama.url + "/v1/chat/completions", json=body, headers=llama.headers, timeout=120)
        assert answer.status_code == 200, answer.text
    finally:
        ServerProfile.objects.filter(pk=other.pk).delete()


def test_killed_llama_server_is_restarted_and_the_restart_recorded(llama):
    old_pid = llama.router_pid()
    os.kill(old_pid, signal.SIGKILL)
    event = wait_for(lambda: Event.objects.filter(kind=Event.Kind.SERVER_RESTARTED).first(), 30, "the restart event")
    assert "exited with code -9" in event.message
    new_pid = wait_for(lambda: llama.router_pid() not in (None, old_pid) and llama.router_pid(), 10, "a new router")
    assert event.details["pid"] == new_pid  # the restart of the router this test killed
    wait_for(llama.healthy, 60, "the default profile loaded again")
    assert chat_once(login(make_user()))["status"] == "complete"


def test_watchdog_reloads_a_profile_instance_that_died(llama):
    """The watchdog as each supervisor's heartbeat runs it (the session's supervisor has it off: here it
    is the test's), reading the router's model list as a beat does."""
    from monitor.llama.client import run_with_client
    from monitor.router.watchdog import Watchdog

    default_id = llama.model_id
    wait_for(llama.healthy, 60, "the default profile")
    router = psutil.Process(llama.router_pid())
    instance = next(child for child in router.children() if default_id in " ".join(child.cmdline()))
    instance.kill()
    wait_for(lambda: router_state(llama, default_id).get("failed"), 20, "the router to see the instance die")
    asked: list[str] = []
    watchdog = Watchdog(asked.append)
    name = find_profile(None).name
    assert watchdog.look(run_with_client(lambda client: client.list_models())) == [f"reloading {name}"]
    watchdog.reloading.join(120)
    event = Event.objects.get(kind=Event.Kind.SERVER_RESTARTED)
    assert event.profile == name and "watchdog loads it again" in event.message
    assert router_state(llama, default_id)["value"] == "loaded"
    assert watchdog.look(run_with_client(lambda client: client.list_models())) == ["ok"] and asked == []


def test_the_heartbeat_restarts_a_router_that_stopped_answering(llama):
    wait_for(llama.healthy, 60, "the default profile")
    router = psutil.Process(llama.router_pid())
    router.suspend()  # alive but deaf: only a check can tell
    try:
        event = wait_for(lambda: Event.objects.filter(kind=Event.Kind.SERVER_RESTARTED).first(), 40, "the restart")
        assert re.search(r"^Restarted on request: llama-server did not answer 3 checks in a row", event.message), (
            event.message
        )
    finally:
        if router.is_running():
            router.resume()
    wait_for(llama.healthy, 60, "llama-server back")


def test_remote_profile_is_checked_and_chats_through_the_remote_server(run_dir):
    port = stack.free_port()
    env = dict(os.environ, LLAMA_API_KEY="remote-secret")
    remote = stack.PlainLlamaServer(
        run_dir,
        [
            os.environ["LLAMA_SERVER_BIN"], "--model", str(MODELS / GEMMA), "--host", "127.0.0.1", "--port", str(port),
            "--ctx-size", "2048", "--parallel", "1", "--threads", "1", "--no-webui",
            "--chat-template-file", str(Path(__file__).resolve().parents[2] / "monitor/chat_templates/gemma3.jinja"),
        ],
        env,
        f"http://127.0.0.1:{port}",
    )  # fmt: skip
    remote.name, remote.log_path = "llama-remote", run_dir / "llama-remote.log"
    remote.start()
    try:
        base = dict(name="remote-box", remote_url=f"http://127.0.0.1:{port}", model_file="")
        nowhere = ServerProfile(**{**base, "remote_url": f"http://127.0.0.1:{stack.free_port()}"})
        wrong_key = ServerProfile(**base, remote_api_key="wrong")
        for candidate, message in ((nowhere, "No llama-server answers"), (wrong_key, "refused the API key")):
            with pytest.raises(Exception) as refused:
                validate_profile(candidate)
            assert message in refused.value.message_dict["remote_url"][0]
        assert not ServerProfile.objects.filter(name="remote-box").exists()

        profile = ServerProfile(**base, remote_api_key="remote-secret")
        validate_profile(profile)
        save_profile(profile)
        http = login(make_user())
        done = chat_once(http, "remote-box")
        assert done["status"] == "complete", done
        slots = httpx.get(remote.url + "/slots", headers={"Authorization": "Bearer remote-secret"}).json()
        assert slots[0]["id_task"] >= 0  # the remote server did the work
        page = http.get("/").text
        assert "remote-secret" not in page  # the key never reaches a page
    finally:
        ServerProfile.objects.filter(name="remote-box").delete()
        remote.stop()


def test_non_staff_get_403_on_every_profile_page_and_action(web_server):
    profile = find_profile(None)
    person = login(make_user())
    anonymous = httpx.Client(base_url=str(person.base_url))
    pages = ["/monitor/profiles/", "/monitor/profiles/status.json", "/monitor/profiles/new/",
             f"/monitor/profiles/{profile.pk}/", f"/monitor/profiles/{profile.pk}/edit/",
             f"/monitor/profiles/{profile.pk}/delete/"]  # fmt: skip
    actions = ["clone", "delete", "load", "unload", "edit"]
    for client in (person, anonymous):
        for url in pages:
            response = client.get(url)
            assert response.status_code == 403, url
            assert "staff" in response.text.lower(), url  # our page, not a generic refusal
    # A logged-in person with a valid CSRF token: the refusal is ours, not the CSRF check's.
    for action in actions:
        token = person.cookies["csrftoken"]
        response = person.post(f"/monitor/profiles/{profile.pk}/{action}/", data={"csrfmiddlewaretoken": token})
        assert response.status_code == 403 and "staff" in response.text.lower(), action
    assert ServerProfile.objects.filter(pk=profile.pk).exists()
