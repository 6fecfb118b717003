"""OIDC login in the browser, end to end through a real provider (django-oauth-toolkit in its own
process, tests/support/oidc_provider/): the login page's button, the provider's own login page, back
to the chat; the provider's refusal of a disabled person, ours of a person outside the required group,
and a provider that is down named on our login page. The app runs as its own Daphne, started with the
OIDC variables an office would set (the session's Daphne runs without them)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.support.oidc_provider import PASSWORDS, Provider
from tests.support.stack import second_web_server


@pytest.fixture(scope="module")
def provider():
    provider = Provider().start()
    yield provider
    provider.close()


@pytest.fixture(scope="module")
def oidc_app(provider, web_server, run_dir):
    """A second Daphne on the same database and Redis, with OIDC login on; its URL."""
    with second_web_server("daphne-oidc", run_dir, provider.environment()) as url:
        yield url


def through_provider(page, app: str, provider: Provider, role: str) -> None:
    page.goto(app + "/login/")
    page.click("#oidc-login")
    page.fill("#provider-username", provider.name(role))
    page.fill("#provider-password", PASSWORDS[role])
    page.click("#provider-submit")


def test_oidc_login_in_the_browser(browser, oidc_app, provider, run_dir):
    person = browser.new_context().new_page()
    person.goto(oidc_app + "/login/")
    expect(person.locator("#oidc-login")).to_have_text("Log in with Office SSO")
    through_provider(person, oidc_app, provider, "alice")
    expect(person.locator("#composer")).to_be_visible()
    person.screenshot(path=str(run_dir / "oidc-chat.png"))
    expect(person.locator("header")).to_contain_text("Users")  # alice is in the provider's admins: staff
    person.context.close()

    disabled = browser.new_context().new_page()
    through_provider(disabled, oidc_app, provider, "carol")
    expect(disabled.locator("#provider-error")).to_have_text("This account is inactive.")
    disabled.context.close()

    ungrouped = browser.new_context().new_page()
    through_provider(ungrouped, oidc_app, provider, "erin")
    expect(ungrouped.locator("#login-refusal")).to_have_text(
        "Your account at Office SSO is not allowed to use this server."
    )
    ungrouped.context.close()

    provider.kill()
    down = browser.new_context(locale="zh-CN").new_page()
    down.goto(oidc_app + "/login/")
    down.click("#oidc-login")
    expect(down.locator("#login-refusal")).to_have_text(
        "无法连接登录服务 Office SSO，其账户暂时无法登录。请过几分钟再试；如果持续如此，请告知工作人员。"
    )
    down.screenshot(path=str(run_dir / "oidc-provider-down.png"))
    down.context.close()
