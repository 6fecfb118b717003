"""An admin in Chromium creates a server profile through the form, loads it, chats through it,
and changes its context size; llama-server's own /props reports the new size."""

from __future__ import annotations

import re

import httpx
import pytest
from playwright.sync_api import expect

from monitor.models import Event, ServerProfile
from monitor.nodes.registry import placement_here
from tests.support.client import base_url, make_user
from tests.support.profiles import live_id_here
from tests.support.stack import wait_until

pytestmark = pytest.mark.usefixtures("web_server", "celery_worker")
TEMPLATE_PATH = "monitor/chat_templates/gemma3.jinja"


def logged_in(browser, **extra):
    user = make_user(**extra)
    page = browser.new_page()
    page.goto(base_url() + "/login/")
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", user.raw_password)
    page.click("button[type=submit]")
    page.wait_for_url("**/")
    return page


def n_ctx(llama, name: str) -> int:
    model_id = live_id_here(ServerProfile.objects.get(name=name))
    props = httpx.get(llama.url + "/props", params={"model": model_id}, headers=llama.headers, timeout=10).json()
    return props["default_generation_settings"]["n_ctx"]


def test_admin_creates_loads_chats_and_changes_context(browser, llama):
    from pathlib import Path

    template = (Path(__file__).resolve().parents[2] / TEMPLATE_PATH).read_text()
    admin = logged_in(browser, is_staff=True)
    try:
        admin.goto(base_url() + "/monitor/profiles/")
        admin.click("text=New profile")
        # A bad value first: the form says what is wrong and nothing is saved.
        admin.fill("input[name=name]", "browser-4k")
        admin.select_option("select[name=model_file]", "gemma-3-270m-q4_k_m.gguf")
        admin.fill("input[name=ctx_size]", "100")
        admin.fill("input[name=parallel]", "1")
        admin.fill("input[name=threads]", "2")
        admin.fill("textarea[name=chat_template_jinja]", template)
        admin.click("#profile-form button[type=submit]")
        expect(admin.locator("#profile-form")).to_contain_text("Must be between 256 and 4194304")
        assert not ServerProfile.objects.filter(name="browser-4k").exists()

        admin.fill("input[name=ctx_size]", "4096")
        admin.click("#profile-form button[type=submit]")
        expect(admin.locator("h1")).to_contain_text("browser-4k")
        expect(admin.locator("#command-line")).to_contain_text("--ctx-size 4096")
        admin.click("#load")
        expect(admin.locator("td.state")).to_have_attribute("data-state", "loaded", timeout=60_000)
        assert n_ctx(llama, "browser-4k") == 4096

        # A person picks the profile in the chat and gets an answer from it.
        person = logged_in(browser)
        person.goto(base_url() + "/")
        option = person.locator("#profile option[value=browser-4k]")
        expect(option).to_contain_text("4096")
        person.select_option("#profile", "browser-4k")
        person.fill("#prompt", "Say hello.")
        person.click("#send")
        answer = person.locator(".message.assistant").last
        expect(answer).to_contain_text(re.compile(r"\w"), timeout=60_000)
        # Stopped if still being written (a short answer may already have ended).
        person.evaluate("() => { const stop = document.getElementById('stop'); if (!stop.hidden) stop.click(); }")
        expect(answer).to_have_attribute("data-status", re.compile("^(complete|stopped)$"), timeout=30_000)
        expect(person.locator("#send")).to_be_enabled(timeout=30_000)
        conversation = ServerProfile.objects.get(name="browser-4k").conversations.get()
        assert conversation.owner.username == person.locator(".who").inner_text()

        # The admin changes the context size: the new revision loads and llama-server reports it.
        admin.click("text=Edit")
        admin.fill("input[name=ctx_size]", "3072")
        admin.click("#profile-form button[type=submit]")
        expect(admin.locator("#command-line")).to_contain_text("--ctx-size 3072")
        expect(admin.locator("td.served")).to_contain_text("browser-4k@2", timeout=60_000)
        expect(admin.locator("td.state")).to_have_attribute("data-state", "loaded", timeout=60_000)
        profile = ServerProfile.objects.get(name="browser-4k")
        assert placement_here(profile).live_revision == 2 and profile.revision == 2
        assert n_ctx(llama, "browser-4k") == 3072
        # Written once the old revision has drained and been unloaded, a moment after the page shows it.
        loaded = Event.objects.filter(profile="browser-4k", kind="profile_loaded", details__revision=2)
        wait_until(loaded.exists, 60, "revision 2's profile_loaded event")
    finally:
        ServerProfile.objects.filter(name="browser-4k").delete()
