"""A person makes a collection, adds documents to it (many at once: one refused at upload and one that
cannot be read are named, the other is read and indexed), picks it in a conversation, asks, and opens the
page the answer cites. What the answer says is forced by the profile's ``--grammar`` (the real default
model writes it); the passages, the citation check and the page are the product's own."""

import shlex

import pytest
from playwright.sync_api import expect

from chat.models import Conversation
from tests.browser.test_chat_page import log_in
from tests.support import pdfs
from tests.support.client import base_url, make_user
from tests.support.profiles import default_copy

pytestmark = pytest.mark.usefixtures("web_server", "celery_worker")

SECRET = "The merger code name is Bluebird and the price is forty dollars a share."
ANSWER = "The code name is Bluebird (merger.txt, p. 1)."  # the profile form refuses [ ] in its arguments
GRAMMAR = 'root ::= "' + ANSWER + '"'


def test_ask_a_collection_and_open_the_cited_page(browser, llama, tmp_path):
    user = make_user()
    slug = f"handbook-{user.pk}"
    files = {"merger.txt": SECRET.encode(), "broken.pdf": pdfs.corrupt_pdf(), "blank.pdf": pdfs.image_text_pdf([[]])}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    page = browser.new_page()
    log_in(page, user)

    page.goto(base_url() + "/collections/")
    page.fill("#create-collection input[name=name]", "Handbook")
    page.fill("#create-collection input[name=slug]", slug)
    page.click("#create-collection button[type=submit]")
    expect(page.locator("#collection-name")).to_have_text("Handbook")
    page.set_input_files("#collection-files", [str(tmp_path / name) for name in files])
    page.click("#collection-add")
    expect(page.locator("#upload-errors li")).to_have_text("broken.pdf: This PDF is damaged and cannot be read.")
    rows = page.locator("#collection-documents tr")
    merger = rows.filter(has_text="merger.txt")
    blank = rows.filter(has_text="blank.pdf")
    expect(merger).to_have_attribute("data-state", "indexed", timeout=300_000)
    expect(blank).to_have_attribute("data-state", "failed", timeout=300_000)
    expect(blank.locator(".doc-error")).not_to_be_empty()

    with default_copy(llama, "forced-citation", f"--grammar {shlex.quote(GRAMMAR)}") as profile:
        conversation = Conversation.objects.create(owner=user, profile=profile, thinking_enabled=False)
        page.goto(base_url() + f"/c/{conversation.id}/")
        page.click("#collection-picker summary")
        page.locator("#pick-collections-form label", has_text=f"#{slug}").locator("input").check()
        page.click("#pick-collections-form button[type=submit]")
        expect(page.locator("#collection-picker summary")).to_contain_text("(1)")
        page.wait_for_function("() => document.getElementById('chat').dataset.connected === '1'")
        page.fill("#prompt", "What is the merger code name?")
        page.click("#send")
        answer = page.locator("article.message.assistant").last
        expect(answer).to_have_attribute("data-status", "complete", timeout=240_000)
        expect(answer.locator(".body")).to_contain_text("(merger.txt, p. 1)")
        link = answer.locator(".sources a.source-link")
        expect(link).to_have_text("merger.txt, p. 1")
        with page.context.expect_page() as opened:
            link.click()
        cited = opened.value
        expect(cited.locator("#cited-title")).to_have_text("merger.txt, page 1")
        expect(cited.locator("#cited-text")).to_contain_text("Bluebird")
        cited.close()
    page.close()
