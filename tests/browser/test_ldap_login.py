"""Directory login in the browser, end to end against a real OpenLDAP ``slapd`` over StartTLS
(tests/support/ldap_server.py): a person types their directory account on our login page and lands in
the chat (staff by their directory group), a person the directory marks disabled is refused with the
login page's own words, and a directory that stops answering (SIGSTOP) is named on the login page, in
the person's language. The app runs as its own Daphne, started with the LDAP variables an office would
set (the session's Daphne runs without them)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.support.ldap_server import PASSWORDS, Directory
from tests.support.stack import second_web_server


@pytest.fixture(scope="module")
def directory():
    directory = Directory(Path(tempfile.mkdtemp(prefix="qwenweb-ldap-browser-"))).start()
    yield directory
    directory.close()


@pytest.fixture(scope="module")
def ldap_app(directory, web_server, run_dir):
    """A second Daphne on the same database and Redis, with directory login on; its URL."""
    with second_web_server("daphne-ldap", run_dir, directory.environment()) as url:
        yield url


def log_in(page, app: str, username: str, password: str) -> None:
    page.goto(app + "/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")


def test_ldap_login_in_the_browser(browser, ldap_app, directory, run_dir):
    person = browser.new_context().new_page()
    log_in(person, ldap_app, "alice", PASSWORDS["alice"])
    expect(person.locator("#composer")).to_be_visible()
    expect(person.locator("header")).to_contain_text("Users")  # alice is in the directory's admins: staff
    person.screenshot(path=str(run_dir / "ldap-chat.png"))
    person.context.close()

    disabled = browser.new_context().new_page()
    log_in(disabled, ldap_app, "carol", PASSWORDS["carol"])
    expect(disabled.locator("p.error")).to_have_text("Your username and password didn't match. Please try again.")
    disabled.context.close()

    directory.stop()  # accepts connections, answers nothing: every call runs into its timeout
    try:
        down = browser.new_context(locale="zh-CN").new_page()
        log_in(down, ldap_app, "bob", PASSWORDS["bob"])
        expect(down.locator("#login-refusal")).to_have_text(
            "无法连接目录服务器，目录账户暂时无法登录。请过几分钟再试；如果持续如此，请告知工作人员。", timeout=60_000
        )
        down.screenshot(path=str(run_dir / "ldap-directory-down.png"))
        down.context.close()
    finally:
        directory.go()
