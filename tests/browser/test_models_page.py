"""An admin in Chromium: the model registry, a download with live progress, the planner."""

import os
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect

from tests.support.client import base_url, login, make_user
from tests.support.file_server import FileServer
from tests.support.page_checks import requests_to

MODELS = Path(os.environ["QWENWEB_MODELS_DIR"])
pytestmark = pytest.mark.usefixtures("web_server")


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    root = tmp_path_factory.mktemp("browser-mirror")
    (root / "fetched-by-admin.gguf").symlink_to((MODELS / "gemma-3-270m-q4_k_m.gguf").resolve())
    server = FileServer(root)
    yield server
    server.close()


def admin_page(browser):
    admin = make_user(is_staff=True)
    page = browser.new_page()
    page.goto(base_url() + "/login/")
    page.fill("input[name=username]", admin.username)
    page.fill("input[name=password]", admin.raw_password)
    page.click("button[type=submit]")
    page.wait_for_url("**/")
    return page


def test_download_shows_live_progress_and_lands_in_the_registry(browser, mirror, celery_worker):
    page = admin_page(browser)
    polls = requests_to(page, "/monitor/models/downloads.json")
    page.goto(base_url() + "/monitor/models/")
    expect(page.locator("#registry")).to_contain_text("gemma-3-270m-q4_k_m.gguf")
    expect(page.locator("#registry")).to_contain_text("Q4_K_M")
    page.fill("input[name=url]", mirror.url("slow", "fetched-by-admin.gguf"))
    page.click("#download-form button[type=submit]")
    row = page.locator("#jobs tbody tr").first
    expect(row).to_have_attribute("data-status", "running", timeout=30_000)
    # The bar moves while the page is open, without a reload.
    first = int(row.locator("progress").get_attribute("value"))
    page.wait_for_function(
        f"() => Number(document.querySelector('#jobs tbody tr progress').value) > {first}", timeout=30_000
    )
    expect(row).to_have_attribute("data-status", "done", timeout=120_000)
    # Drawn from the answer that said nothing is downloading any more: the page stops asking.
    active = ",".join(
        f"#jobs tbody tr[data-status={status}]" for status in ("queued", "running", "verifying", "cancelling")
    )
    expect(page.locator(active)).to_have_count(0)
    polls.wait_idle()
    asked = polls.count
    page.wait_for_timeout(3500)  # a few polling rounds (one a second)
    assert polls.count == asked, "the downloads were asked for after every one had ended"
    page.reload()
    expect(page.locator("#registry")).to_contain_text("fetched-by-admin.gguf")
    page.close()


def test_planner_shows_the_breakdown(browser):
    page = admin_page(browser)
    page.goto(
        base_url() + "/monitor/models/planner/?model=gemma-3-270m-q4_k_m.gguf&ctx_size=4096&parallel=2"
        "&cache_type_k=f16&cache_type_v=f16&gpu_layers=0&cpu_moe_layers=0&ubatch=512&free_vram_gib=2&margin_gib=1"
    )
    totals = page.locator("#plan-totals")
    expect(totals).to_contain_text("KV cache")
    # 42 MiB of KV cache on the CPU, as llama-server allocates for these settings.
    expect(totals.locator("tr", has_text="KV cache").locator("td").nth(2)).to_have_text("42")
    expect(page.locator("#plan-layers tbody tr")).to_have_count(20)
    expect(page.locator("#advice")).to_contain_text("GPU layers: 19")
    page.close()


def test_model_pages_are_staff_only():
    person = make_user()
    http = login(person)
    for path in ("/monitor/models/", "/monitor/models/planner/", "/monitor/models/downloads.json"):
        assert http.get(path).status_code == 403
        assert httpx.get(base_url() + path).status_code == 403
    token = http.cookies["csrftoken"]
    refused = http.post("/monitor/models/download/", data={"csrfmiddlewaretoken": token, "url": "http://x/a.gguf"})
    assert refused.status_code == 403
