"""Sign-up with staff approval, end to end in the browser: the person signs up, is told to wait
at login, a staff member approves them on the users page, and they reach the chat page."""

from __future__ import annotations

from playwright.sync_api import expect

from chat.accounts import signup
from tests.support.client import base_url, make_user

PASSWORD = "a-Long-pass-2026"


def fill_login(page, username: str, password: str) -> None:
    page.goto(base_url() + "/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")


def test_sign_up_with_approval_end_to_end(browser, web_server, run_dir):
    signup.set_signup_mode("approval")
    try:
        name = make_user().username + "-new"
        person = browser.new_context().new_page()
        person.goto(base_url() + "/login/")
        person.click("#signup-link")
        person.fill("input[name=username]", name)
        person.fill("input[name=password1]", PASSWORD)
        person.fill("input[name=password2]", PASSWORD)
        person.click("#signup-form button[type=submit]")
        expect(person.locator("#signup-pending")).to_contain_text("waiting for approval")
        fill_login(person, name, PASSWORD)
        expect(person.locator("#login-refusal")).to_have_text(
            "Your account is waiting for approval by a staff member. Try again once they have approved it."
        )

        staff = make_user(is_staff=True)
        admin = browser.new_context().new_page()
        fill_login(admin, staff.username, staff.raw_password)
        admin.click("header >> text=Users")
        row = admin.locator(f'#users tr[data-user="{name}"]')
        expect(row.locator(".state")).to_have_text("Waiting for approval")
        row.locator("button.approve").click()
        expect(admin.locator(".flash")).to_contain_text("Account approved.")
        expect(admin.locator(f'#users tr[data-user="{name}"] .state')).to_have_text("Enabled")
        admin.screenshot(path=str(run_dir / "users-page.png"))

        fill_login(person, name, PASSWORD)
        expect(person.locator("#composer")).to_be_visible()
        person.context.close()
        admin.context.close()
    finally:
        signup.set_signup_mode("off")
