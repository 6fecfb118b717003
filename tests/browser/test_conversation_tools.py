"""Conversation tools in Chromium: search finds an old answer, an edited question is answered again.

The conversations are made with the ORM; the new answer is only checked to arrive (it is stopped
once its first words show), never for what the model writes.
"""

import re

import pytest
from playwright.sync_api import expect

from chat.models import Conversation, Message
from tests.browser.test_chat_page import log_in
from tests.support.client import base_url, make_user

pytestmark = pytest.mark.usefixtures("web_server")


def conversation_with(user, *pairs, title=""):
    conversation = Conversation.objects.create(owner=user, title=title)
    for question, answer in pairs:
        Message.objects.create(conversation=conversation, role="user", content=question)
        Message.objects.create(conversation=conversation, role="assistant", content=answer)
    return conversation


def new_answer_arrives(page, old_ids: set[str]):
    """The last answer is a new one and shows its first words (or finishes); then it is stopped."""
    answer = page.locator("article.message.assistant").last
    page.wait_for_function(
        "(old) => { const a = [...document.querySelectorAll('article.assistant')].pop();"
        " return a && !old.includes(a.dataset.id)"
        " && (a.querySelector('.body').textContent.length > 0 || a.dataset.status !== 'streaming'); }",
        arg=sorted(old_ids),
        timeout=60_000,
    )
    page.evaluate("() => { const stop = document.getElementById('stop'); if (!stop.hidden) stop.click(); }")
    expect(answer).to_have_attribute("data-status", re.compile("^(complete|stopped)$"), timeout=15_000)
    return answer


def test_search_finds_a_word_from_an_old_answer(browser, llama):
    user = make_user()
    old = conversation_with(user, ("about reptiles", "The quetzalcoatlus was as tall as a giraffe."), title="Reptiles")
    conversation_with(user, ("hello", "hi"), title="Greeting")
    page = browser.new_page()
    log_in(page, user)
    page.fill("#search-input", "quetzalcoatlus")
    page.keyboard.press("Enter")
    results = page.locator("#search-results li")
    expect(results).to_have_count(1)
    expect(results.first.locator(".snippet")).to_contain_text("quetzalcoatlus")
    results.first.locator("a").click()
    expect(page).to_have_url(f"{base_url()}/c/{old.id}/")
    expect(page.locator("article.message.assistant .body")).to_contain_text("as tall as a giraffe")
    page.close()


def test_edit_and_replace_answers_the_edited_question_here(browser, llama):
    user = make_user()
    conversation = conversation_with(
        user, ("First question?", "OLD-ANSWER-ONE"), ("Second question?", "OLD-ANSWER-TWO"), title="Edit me"
    )
    old_ids = {str(pk) for pk in conversation.messages.values_list("id", flat=True)}
    page = browser.new_page()
    log_in(page, user)
    page.goto(f"{base_url()}/c/{conversation.id}/")
    page.wait_for_function("() => document.getElementById('chat').dataset.connected === '1'")
    first = page.locator("article.message.user").first
    first.locator(".edit-question").click()
    editor = first.locator("form.edit-form")
    expect(editor.locator("textarea")).to_have_value("First question?")
    editor.locator("textarea").fill("What colour is the sea?")
    editor.locator("input[value=replace]").check()
    editor.locator(".edit-submit").click()

    expect(page).to_have_url(f"{base_url()}/c/{conversation.id}/")
    expect(page.locator("article.message.user")).to_have_count(1)
    expect(page.locator("article.message.user .body")).to_have_text("What colour is the sea?")
    new_answer_arrives(page, old_ids)
    expect(page.locator("article.message.assistant")).to_have_count(1)
    expect(page.locator("#messages")).not_to_contain_text("OLD-ANSWER")
    assert list(conversation.messages.values_list("role", flat=True)) == ["user", "assistant"]
    # A reload shows the stored state and does not ask again.
    page.reload()
    expect(page.locator("article.message.assistant")).to_have_count(1)
    page.close()


def test_edit_and_keep_continues_in_a_copy(browser, llama):
    user = make_user()
    conversation = conversation_with(
        user, ("First question?", "OLD-ANSWER-ONE"), ("Second question?", "OLD-ANSWER-TWO"), title="Keep me"
    )
    before = list(conversation.messages.values_list("id", "content"))
    page = browser.new_page()
    log_in(page, user)
    page.goto(f"{base_url()}/c/{conversation.id}/")
    page.wait_for_function("() => document.getElementById('chat').dataset.connected === '1'")
    second = page.locator("article.message.user").nth(1)
    second.locator(".edit-question").click()
    editor = second.locator("form.edit-form")
    editor.locator("textarea").fill("A different second question?")
    editor.locator("input[value=keep]").check()
    editor.locator(".edit-submit").click()

    page.wait_for_url(re.compile(r"/c/(?!" + str(conversation.id) + r")[0-9a-f-]{36}/$"))
    expect(page.locator("article.message.user .body")).to_have_text(["First question?", "A different second question?"])
    new_answer_arrives(page, {str(pk) for pk, _content in before})
    expect(page.locator("article.message.assistant").first.locator(".body")).to_have_text("OLD-ANSWER-ONE")
    expect(page.locator("#messages")).not_to_contain_text("OLD-ANSWER-TWO")
    expect(page.locator("#conversation-list")).to_contain_text("Keep me (edited)")
    assert list(conversation.messages.values_list("id", "content")) == before
    page.close()
