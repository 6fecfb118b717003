"""The profile page asks for its status only while something on it is in motion (static/monitor/profiles.js):
not while everything has settled, not while its tab is hidden; a load the admin starts sets it asking again,
and it stops once the load has ended. The load is held by freezing the Celery worker it is queued for."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from monitor.profiles.selectors import find_profile
from tests.browser.test_models_page import admin_page
from tests.support.client import base_url
from tests.support.hold import worker_paused
from tests.support.page_checks import requests_to

pytestmark = pytest.mark.usefixtures("web_server")
STATUS_PATH = "/monitor/profiles/status.json"
# Longer than a few polling rounds (one a second): a page still polling asks at least twice in it.
QUIET_MS = 3500

HIDE = """() => {
  Object.defineProperty(document, "hidden", { configurable: true, get: () => true });
  Object.defineProperty(document, "visibilityState", { configurable: true, get: () => "hidden" });
  document.dispatchEvent(new Event("visibilitychange"));
}"""
SHOW = """() => {
  delete document.hidden;
  delete document.visibilityState;
  document.dispatchEvent(new Event("visibilitychange"));
}"""


def assert_settled_and_quiet(page, status) -> None:
    """Behind the page's own word that nothing is in motion (drawn from the server's answer, or with the
    page), no request for the status in a few polling rounds."""
    expect(page.locator("#profiles")).to_have_attribute("data-in-motion", "0", timeout=60_000)
    status.wait_idle()
    asked = status.count
    page.wait_for_timeout(QUIET_MS)
    assert status.count == asked, f"{status.count - asked} status requests while everything had settled"


def test_profile_page_polls_only_while_a_load_is_in_motion(browser, llama, celery_worker):
    profile = find_profile(None)
    page = admin_page(browser)
    status = requests_to(page, STATUS_PATH)
    page.goto(f"{base_url()}/monitor/profiles/{profile.pk}/")
    expect(page.locator("td.state")).to_have_attribute("data-state", "loaded")
    assert_settled_and_quiet(page, status)

    with worker_paused(celery_worker.default):
        # The admin starts a load; the worker cannot run it yet: the page follows it.
        page.click("#load")
        expect(page.locator("#profiles")).to_have_attribute("data-in-motion", "1")
        status.wait_for(status.count + 2)
        # Hidden, the page stops asking (an answer on its way when it was hidden comes back, nothing after).
        page.evaluate(HIDE)
        status.wait_idle()
        asked = status.count
        page.wait_for_timeout(QUIET_MS)
        assert status.count == asked, "status requests while the tab was hidden"
        # Shown again while the load is still waiting: it asks at once, and goes on.
        page.evaluate(SHOW)
        status.wait_for(asked + 2)

    # The worker runs the load; its event ends it, and the page stops asking.
    assert_settled_and_quiet(page, status)
    expect(page.locator("td.last-event")).to_contain_text(f"{profile.name} loaded")
    page.close()
