"""Phones and tablets: at 360 and 390 px nothing is wider than the screen (chat, login, API keys), the
conversations open in a drawer that Esc and the shade close, the header's links sit behind a menu, the
composer's controls wrap and its box grows; dark mode follows the system, code and tables included;
the document upload bar stays hidden until a file is chosen. Screenshots: var/artifacts/browser/."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.test_chat_page import log_in
from tests.browser.test_rendering import RICH_ANSWER, screenshot, stored_conversation
from tests.support.client import base_url, make_user

pytestmark = pytest.mark.usefixtures("web_server")

PHONES = [(390, 844), (360, 740)]

# A long unbroken word, a wide table, a long code line and long display maths: the usual sideways pushers.
WIDE_ANSWER = (
    RICH_ANSWER
    + "\n\nsupercalifragilisticexpialidocious" * 1
    + "https://example.org/"
    + "a" * 120
    + "\n\n"
    + "| "
    + " | ".join(f"column {i}" for i in range(14))
    + " |\n|"
    + "---|" * 14
    + "\n"
    + "| "
    + " | ".join(str(i) for i in range(14))
    + " |\n\n"
    + "```\n"
    + "x = 1  # "
    + "long comment " * 20
    + "\n```\n\n"
    + "$$\n"
    + " + ".join(f"a_{{{i}}}^2" for i in range(40))
    + "\n$$\n"
)

# Sideways scrolling is allowed only inside the boxes meant for it (code, tables, display maths). Anything
# else that pokes out of the screen, or any other box that scrolls sideways, is an offender.
OVERFLOW_JS = """
() => {
  const width = document.documentElement.clientWidth;
  const sideways = "pre, .table-wrap, .math-display, table.grid";
  const offenders = [];
  const name = (el) => `${el.tagName}#${el.id}.${el.className}`;
  for (const el of document.body.querySelectorAll("*")) {
    const box = el.getBoundingClientRect();
    const style = getComputedStyle(el);
    if (["auto", "scroll"].includes(style.overflowX) && el.scrollWidth > el.clientWidth + 1 && !el.matches(sideways))
      offenders.push(`${name(el)} scrolls sideways (${el.scrollWidth} > ${el.clientWidth})`);
    if (!box.width || !box.height || (box.right <= width + 1 && box.left >= -1)) continue;
    let clipped = false;
    for (let up = el.parentElement; up && up !== document.body; up = up.parentElement) {
      if (getComputedStyle(up).overflowX !== "visible") { clipped = true; break; }
    }
    if (!clipped) offenders.push(`${name(el)} at ${Math.round(box.left)}..${Math.round(box.right)}`);
  }
  return { scrollWidth: document.documentElement.scrollWidth, width, offenders };
}
"""


def assert_fits(page, where: str) -> None:
    result = page.evaluate(OVERFLOW_JS)
    assert result["scrollWidth"] <= result["width"], (where, result)
    assert result["offenders"] == [], (where, result["offenders"][:10])


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_phone_layout_fits_and_opens_the_drawer(browser, scheme):
    user = make_user()
    conversation = stored_conversation(user, WIDE_ANSWER, title="a conversation with a rather long title")
    for width, height in PHONES:
        context = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme, has_touch=True)
        page = context.new_page()
        page.goto(base_url() + "/login/")
        assert_fits(page, f"login {width}")
        log_in(page, user)
        page.goto(f"{base_url()}/c/{conversation.id}/")
        expect(page.locator("article.assistant .code-block")).to_have_count(2)
        assert_fits(page, f"chat {width}")
        # The header is one compact line; its links are behind the menu.
        assert page.locator(".topbar").bounding_box()["height"] < 56
        expect(page.locator(".topbar form button", has_text="Log out")).to_be_hidden()
        page.click(".menu-toggle")
        expect(page.locator(".topbar form button", has_text="Log out")).to_be_visible()
        assert_fits(page, f"menu {width}")
        page.keyboard.press("Escape")
        expect(page.locator(".topbar form button", has_text="Log out")).to_be_hidden()

        # The conversation's controls past its title sit behind its Settings button.
        delete = page.locator(".chat-head .delete button")
        expect(delete).to_be_hidden()
        page.click(".head-toggle")
        expect(delete).to_be_visible()
        assert_fits(page, f"conversation settings {width}")
        page.keyboard.press("Escape")
        expect(delete).to_be_hidden()

        # The conversation list: hidden, then a drawer; Esc closes it, and so does the shade beside it.
        sidebar = page.locator("#sidebar")
        expect(sidebar).to_be_hidden()
        page.click(".drawer-toggle")
        expect(sidebar).to_be_visible()
        expect(page.locator(".drawer-toggle")).to_have_attribute("aria-expanded", "true")
        expect(sidebar.locator("a", has_text="a conversation with a rather long title")).to_be_visible()
        assert sidebar.bounding_box()["width"] < width
        if width == PHONES[0][0]:
            screenshot(page, f"phone-{width}-{scheme}-drawer")
        page.keyboard.press("Escape")
        expect(sidebar).to_be_hidden()
        page.click(".drawer-toggle")
        expect(sidebar).to_be_visible()
        page.mouse.click(width - 10, height // 2)  # on the shade, right of the drawer
        expect(sidebar).to_be_hidden()

        # The composer: every control on screen, and the box grows with what is typed.
        before = page.locator("#prompt").bounding_box()["height"]
        page.fill("#prompt", "\n".join(f"line {i}" for i in range(8)))
        assert page.locator("#prompt").bounding_box()["height"] > before + 40
        for control in ("#send", "#regenerate", "#profile", ".attach-button >> nth=0"):
            box = page.locator(control).bounding_box()
            assert box and box["x"] >= 0 and box["x"] + box["width"] <= width, control
        assert_fits(page, f"composer {width}")
        screenshot(page, f"phone-{width}-{scheme}-chat")

        page.goto(base_url() + "/keys/")
        assert_fits(page, f"keys {width}")
        page.goto(base_url() + "/")
        assert_fits(page, f"new chat {width}")
        context.close()


def test_desktop_dark_mode_colours_code_and_tables(browser):
    user = make_user()
    conversation = stored_conversation(user, RICH_ANSWER)
    colours = {}
    for scheme in ("light", "dark"):
        context = browser.new_context(viewport={"width": 1280, "height": 800}, color_scheme=scheme)
        page = context.new_page()
        log_in(page, user)
        page.goto(f"{base_url()}/c/{conversation.id}/")
        expect(page.locator("article.assistant .hljs-keyword").first).to_be_visible()
        # Wide screen: the list is a sidebar, the drawer and menu buttons are not shown.
        expect(page.locator("#sidebar")).to_be_visible()
        expect(page.locator(".drawer-toggle")).to_be_hidden()
        expect(page.locator(".menu-toggle")).to_be_hidden()
        expect(page.locator(".head-toggle")).to_be_hidden()
        expect(page.locator(".chat-head .delete button")).to_be_visible()
        colours[scheme] = page.evaluate(
            """() => {
              const style = (selector, property) => getComputedStyle(document.querySelector(selector))[property];
              return {
                page: style("body", "backgroundColor"),
                ink: style("body", "color"),
                keyword: style("article.assistant .hljs-keyword", "color"),
                code: style("article.assistant .code-block", "backgroundColor"),
                header: style("article.assistant th", "backgroundColor"),
                border: style("article.assistant td", "borderTopColor"),
              };
            }"""
        )
        screenshot(page, f"desktop-{scheme}")
        context.close()
    light, dark = colours["light"], colours["dark"]
    assert light["page"] == "rgb(247, 247, 248)" and dark["page"] == "rgb(19, 19, 22)"
    assert dark["ink"] == "rgb(231, 231, 234)"
    # highlight.js's GitHub themes: red keywords (light #d73a49, dark #ff7b72).
    assert light["keyword"] == "rgb(215, 58, 73)" and dark["keyword"] == "rgb(255, 123, 114)"
    for key in ("code", "header", "border"):
        assert light[key] != dark[key], key


def test_upload_bar_hidden_until_a_file_is_chosen(browser, tmp_path):
    """The "Summary language / Upload / Cancel" bar: hidden on a conversation page and a new chat,
    shown once a file is chosen, hidden again by Cancel. On a 360 px phone, an uploaded document's
    card (long name and all) fits the screen too."""
    user = make_user()
    conversation = stored_conversation(user, "hello")
    context = browser.new_context(viewport={"width": 360, "height": 740})
    page = context.new_page()
    log_in(page, user)
    assert "interactive-widget=resizes-content" in page.get_attribute("meta[name=viewport]", "content")
    bar = page.locator("#document-form")
    expect(bar).to_be_hidden()
    page.goto(f"{base_url()}/c/{conversation.id}/")
    expect(bar).to_be_hidden()
    expect(page.locator("text=Summary language")).to_be_hidden()
    notes = tmp_path / "notes.txt"
    notes.write_text("some notes")
    page.set_input_files("#document-input", str(notes))
    expect(bar).to_be_visible()
    expect(page.locator("#document-form-name")).to_contain_text("notes.txt")
    page.click("#document-form-cancel")
    expect(bar).to_be_hidden()

    long_name = tmp_path / "a-rather-long-document-name-for-a-small-phone-screen-2026.txt"
    long_name.write_text("some notes")
    page.set_input_files("#document-input", str(long_name))
    page.click("#document-upload")
    expect(bar).to_be_hidden()
    expect(page.locator(".document .doc-name")).to_contain_text(long_name.name)
    assert_fits(page, "documents 360")
    context.close()


# What a staff page fills in after it loads, and the attribute its script sets once that is in.
FILLED_IN = {
    "/monitor/": ("#chart-load", "data-points", re.compile(r"\d+")),  # the live socket's history, drawn
    "/monitor/profiles/": ("#profiles", "data-in-motion", "0"),  # the profiles' states, settled
}


def test_staff_pages_fit_a_phone(browser):
    """The staff pages at 360 px: wide tables and logs scroll inside their own box, the page does not."""
    staff = make_user(is_staff=True, is_superuser=True)
    context = browser.new_context(viewport={"width": 360, "height": 740})
    page = context.new_page()
    log_in(page, staff)
    for path in ("/connect/", "/monitor/", "/monitor/health/", "/monitor/models/", "/monitor/profiles/"):
        response = page.goto(base_url() + path)
        assert response.status == 200, path
        assert_fits(page, path)
        if path in FILLED_IN:  # and again once what the page fills in after it loads is in
            selector, attribute, value = FILLED_IN[path]
            expect(page.locator(selector)).to_have_attribute(attribute, value)
            assert_fits(page, f"{path} filled in")
    page.click(".menu-toggle")
    expect(page.locator(".topbar-right a", has_text="Server profiles")).to_be_visible()
    assert_fits(page, "staff menu")
    context.close()
