"""An admin in Chromium: live dashboard figures and charts, the no-GPU notice, a one-click self-test, a card
per node (a down one shown down, hostile names as text)."""

import re

import pytest
from django.conf import settings
from playwright.sync_api import expect

from monitor.models import Node
from tests.browser.test_models_page import admin_page
from tests.support.client import base_url, login, make_user
from tests.support.stand_in_node import StandInNode

pytestmark = pytest.mark.usefixtures("web_server")


def test_dashboard_updates_live_and_runs_a_self_test(browser, sampler, celery_worker):
    page = admin_page(browser)
    page.goto(base_url() + "/monitor/")
    expect(page.locator("#gpu-notice")).to_contain_text("No NVIDIA GPU is visible")
    expect(page.locator("#card-servers")).to_contain_text("chat-8k")
    # New samples arrive without a reload: the sample time moves, and the charts gain points.
    last = page.locator("#last-sample")
    expect(last).to_have_attribute("data-t", re.compile(r"\d+"), timeout=15_000)
    first_t = float(last.get_attribute("data-t"))
    first_points = int(page.locator("#chart-load").get_attribute("data-points"))
    page.wait_for_function(
        f"() => Number(document.querySelector('#last-sample').dataset.t) > {first_t} + 1.5", timeout=15_000
    )
    page.wait_for_function(
        f"() => Number(document.querySelector('#chart-load').dataset.points) > {first_points}", timeout=15_000
    )
    assert page.locator("#chart-load canvas").count() == 1
    # Prompt and generation speed of each server seen in the live window: the default's two, and two for
    # each profile an earlier test served and left (their samples stay in the window).
    series = int(page.locator("#chart-throughput").get_attribute("data-series"))
    assert series >= 2 and series % 2 == 0, series
    # One click: the self-test of the default profile runs in the worker and its figures appear.
    page.click("#selftest-run")
    expect(page.locator("#selftest-status")).to_have_text("Self-test finished.", timeout=180_000)
    row = page.locator("#selftest-latest tbody tr", has_text="chat-8k")
    expect(row).to_contain_text("ctx 8192")
    prompt_tps = float(row.locator("td").nth(2).inner_text())
    generation_tps = float(row.locator("td").nth(3).inner_text())
    assert prompt_tps > 0 and generation_tps > 0
    expect(page.locator("#timeline tbody")).to_contain_text("Self-test of chat-8k")
    page.close()


def test_dashboard_is_staff_only(browser):
    person = make_user()
    page = browser.new_page()
    page.goto(base_url() + "/login/")
    page.fill("input[name=username]", person.username)
    page.fill("input[name=password]", person.raw_password)
    page.click("button[type=submit]")
    page.wait_for_url("**/")
    response = page.goto(base_url() + "/monitor/")
    assert response.status == 403
    expect(page.locator("h1")).to_have_text("Staff only")
    page.close()
    assert login(make_user()).get("/monitor/dashboard.json").status_code == 403


# Node names, GPU names and served ids are the nodes' own words; shown as text, never as markup.
HOSTILE_NODE = "<img src=x onerror=window.__pwned=1>"
SILENT_NODE = "<script>window.__pwned=2</script>"
HOSTILE_GPU = "<svg onload=window.__pwned=3>"
STAND_IN_SAMPLE = {  # what a second box's sampler would write (a STAND-IN: there is one machine here)
    "host": {"cpu_pct": 5.0, "ram_used_bytes": 8e9, "ram_total_bytes": 64e9, "swap_used_bytes": 0, "load1": 0.5},
    "gpu": {
        "available": True,
        "reason": "",
        "gpus": [{"index": 0, "name": HOSTILE_GPU, "total_bytes": 24e9, "used_bytes": 6e9, "utilization_pct": 40.0}],
    },
    "servers": [
        {
            "profile": "<b>p</b>",
            "ok": True,
            "slots_busy": 1,
            "slots_total": 2,
            "generation_tps": 12.5,
            "prompt_tps": 99.0,
        }
    ],
    "stale": [],
}


def test_node_cards_show_every_node_a_down_one_as_down_and_hostile_names_as_text(browser, sampler, llama):
    hostile = Node.objects.create(name=HOSTILE_NODE, url="http://127.0.0.1:9")
    silent = Node.objects.create(name=SILENT_NODE, url="http://127.0.0.1:9")
    stand_in = StandInNode(HOSTILE_NODE, {"<b>p</b>": (2, "<i>m</i>@1")}, sample=STAND_IN_SAMPLE)
    stand_in.start()
    try:
        page = admin_page(browser)
        page.goto(base_url() + "/monitor/")
        main = page.locator("#nodes .node").filter(has=page.locator("h2", has_text=settings.NODE_NAME))
        # The main box's own node: its real heartbeat and its real sampler (no GPU on this machine).
        expect(main).to_have_attribute("data-state", "up", timeout=15_000)
        expect(main.locator("h2")).to_have_text(f"{settings.NODE_NAME} (main box)")
        expect(main).to_contain_text("No NVIDIA GPU")
        expect(main.locator(".served[data-profile='chat-8k']")).to_contain_text("slots busy / free")
        card = page.locator("#nodes .node").filter(has=page.locator("h2", has_text=HOSTILE_NODE))
        expect(card).to_have_attribute("data-state", "up")
        expect(card.locator("h2")).to_have_text(HOSTILE_NODE)
        expect(card.locator(".gpu")).to_contain_text("#0 " + HOSTILE_GPU)
        expect(card.locator(".gpu")).to_contain_text("6.00 GB / 18.00 GB")
        served = card.locator(".served")
        expect(served).to_contain_text("<b>p</b> · <i>m</i>@1")
        expect(served).to_contain_text("1 / 1")  # slots busy / free
        expect(served).to_contain_text("12.5 / 99.0")
        down = page.locator("#nodes .node").filter(has=page.locator("h2", has_text=SILENT_NODE))
        expect(down).to_have_attribute("data-state", "down")
        expect(down).to_contain_text("down · Heartbeat never seen")
        # Its heartbeat stops: the card turns down, without a reload.
        stand_in.stop()
        expect(card).to_have_attribute("data-state", "down", timeout=15_000)
        expect(card).to_contain_text("down · Heartbeat")
        assert page.evaluate("window.__pwned") is None
        assert page.locator("#nodes img, #nodes script, #nodes svg, #nodes i").count() == 0  # (its figures are in <b>)
        page.close()
    finally:
        stand_in.remove()
        hostile.delete()
        silent.delete()
