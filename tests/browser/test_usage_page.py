"""The staff usage page in Chromium: the vendored uPlot draws a series per value under the page's CSP,
names (hostile ones too) shown as text, the filters narrow the view, the CSV link downloads it."""

from __future__ import annotations

import uuid

import pytest
from playwright.sync_api import expect

from chat.usage import services
from chat.usage.services import UsageEntry
from tests.browser.test_models_page import admin_page
from tests.support.client import base_url, make_user

pytestmark = pytest.mark.usefixtures("web_server")

HOSTILE = '<img src=x onerror="window.__pwned=1">'


def test_the_usage_page_charts_the_view_and_shows_names_as_text(browser):
    model = f"ledger-{uuid.uuid4().hex[:8]}"
    plain, hostile = make_user(), make_user(username=f"{HOSTILE}{uuid.uuid4().hex[:4]}"[:150])
    for person, tokens in ((plain, 90), (hostile, 30)):
        services.record(UsageEntry(user_id=person.pk, kind="chat", profile=model, prompt_tokens=tokens))
    page = admin_page(browser)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(base_url() + "/staff/usage/")
    page.select_option("select[name=model]", model)
    page.select_option("select[name=bucket]", "week")
    page.click("#usage-filters button[type=submit]")
    chart = page.locator("#usage-chart")
    expect(chart).to_have_attribute("data-series", "2")
    expect(chart.locator("canvas")).to_have_count(1)
    expect(chart.locator(".u-legend")).to_contain_text(hostile.username)  # as text
    rows = page.locator("#usage-table tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.first).to_contain_text(plain.username)
    expect(rows.nth(1)).to_contain_text(hostile.username)
    with page.expect_download() as download:
        page.click("#usage-csv")
    text = open(download.value.path(), encoding="utf-8").read()
    assert plain.username in text and "Person,Requests" in text
    assert page.evaluate("window.__pwned") is None and not errors
    page.close()
