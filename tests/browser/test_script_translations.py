"""The page scripts' strings come from Django's JavaScript catalogue and nowhere else: a Chinese browser gets
them in Chinese (plurals through ngettext, values through interpolate), an English one in English with the
right plural form, and the page carries no strings of its own for the scripts (no JSON blocks, no data-)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.test_chat_page import log_in
from tests.support.client import base_url, make_user

pytestmark = pytest.mark.usefixtures("web_server")

STATS = {"prompt_tokens": 12, "output_tokens": 1, "ttft_ms": 85, "tokens_per_second": 31.2}
EXPECTED = {
    "zh-hans": {
        "thinking": "思考过程",
        "badge": "已停止",
        "stats": "提示词 12 个词元 · 输出 1 个词元 · 首个词元 85 毫秒 · 31.2 词元/秒",
        "parts": "已摘要 1 / 3 部分",
        "again": "继续摘要",
        "delete": "删除",
        "edit": "编辑",
    },
    "en": {
        "thinking": "Thinking",
        "badge": "Stopped",
        "stats": "12 prompt tokens · 1 output token · first token 85 ms · 31.2 tokens/s",
        "parts": "1 of 3 parts summarized",
        "again": "Continue the summary",
        "delete": "Delete",
        "edit": "Edit",
    },
}


def conversation_with_script_strings(user):
    """A stopped answer with its figures and thinking, and a summary that failed one part in three."""
    from chat.models import Conversation, Document, DocumentChunk, Message

    conversation = Conversation.objects.create(owner=user, title="strings")
    Message.objects.create(conversation=conversation, role="user", content="hello")
    Message.objects.create(
        conversation=conversation, role="assistant", content="Hi.", reasoning="Greeting.", status="stopped", stats=STATS
    )
    document = Document.objects.create(
        owner=user, conversation=conversation, name="notes.txt", kind=Document.Kind.TEXT, status=Document.Status.FAILED
    )
    for index in range(3):
        DocumentChunk.objects.create(
            document=document,
            level=0,
            index=index,
            first_page=index + 1,
            last_page=index + 1,
            text="x",
            done=index == 0,
        )
    return conversation


@pytest.mark.parametrize("language", ["zh-hans", "en"])
def test_script_strings_come_from_the_catalogue(browser, language):
    user = make_user()
    conversation = conversation_with_script_strings(user)
    header = "zh-CN,zh;q=0.9" if language == "zh-hans" else "en-US,en;q=0.9"
    context = browser.new_context(locale=header.split(",")[0], extra_http_headers={"Accept-Language": header})
    page = context.new_page()
    catalogues: list[str] = []
    page.on("response", lambda response: "/i18n/js/" in response.url and catalogues.append(response.url))
    log_in(page, user)
    page.goto(f"{base_url()}/c/{conversation.id}/")
    expected = EXPECTED[language]

    answer = page.locator("article.message.assistant")
    expect(answer.locator("details.reasoning summary")).to_have_text(expected["thinking"])
    expect(answer.locator(".badge.stopped")).to_have_text(expected["badge"])
    expect(answer.locator(".stats")).to_have_text(expected["stats"])
    card = page.locator("article.document")
    expect(card.locator(".doc-progress")).to_have_text(expected["parts"])
    expect(card.locator(".doc-summarize")).to_have_text(expected["again"])
    expect(card.locator(".doc-delete")).to_have_text(expected["delete"])
    expect(page.locator("article.message.user .edit-question")).to_have_text(expected["edit"])

    # One way in: the catalogue for the page's language, a plain script of this app's.
    assert catalogues and all(url.endswith(f"/i18n/js/{language}/") for url in catalogues)
    assert page.locator(f"script[src='/i18n/js/{language}/']").count() == 1
    assert page.locator("#ui-strings, #document-strings, #render-strings").count() == 0
    assert page.evaluate("typeof Qw.fmt") == "undefined"
    context.close()
