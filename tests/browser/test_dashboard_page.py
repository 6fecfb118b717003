"""An admin in Chromium: live dashboard figures and charts, the no-GPU notice, a one-click self-test."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.test_models_page import admin_page
from tests.support.client import base_url, login, make_user

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
    assert int(page.locator("#chart-throughput").get_attribute("data-series")) == 2
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
