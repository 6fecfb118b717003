import os

import pytest
from playwright.sync_api import sync_playwright

CHROMIUM = os.environ.get("QWENWEB_CHROMIUM", "/usr/bin/chromium")


@pytest.fixture(scope="module")
def browser(web_server):
    """Debian's Chromium driven by Playwright (its own browser download does not work offline)."""
    # Playwright's sync API runs an event loop in this thread; the tests' own ORM
    # calls (making users) are plain synchronous code all the same.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
            ],
        )
        yield browser
        browser.close()
    del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]
