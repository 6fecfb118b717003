"""Answers outlive the page, at desktop and phone sizes: a page closed mid-answer, a second page,
Stop from the other page, and nobody else's socket. Nothing here depends on what the model writes:
answers run to their token limit (the ``endless`` profile), text is held still (the llama-server
router frozen) where pages are compared, and the queue is held where a page must open before the
answer starts."""

from __future__ import annotations

import contextlib
import json
import time

import pytest
from playwright.sync_api import expect

from chat.models import Message
from tests.browser.test_chat_page import log_in, long_answer_streaming
from tests.support.client import chat_socket, login, make_user, send
from tests.support.hold import llama_paused, queue_slots_held

pytestmark = pytest.mark.usefixtures("web_server")

SIZES = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
LAST_ANSWER = "article.message.assistant >> nth=-1"


@pytest.fixture(params=sorted(SIZES))
def context(request, browser):
    context = browser.new_context(viewport=SIZES[request.param])
    yield context
    context.close()


def shown(page) -> str:
    return page.locator(LAST_ANSWER).locator(".body").inner_text()


def settled_text(page) -> str:
    """The answer's text once it stops changing (the model is frozen; the last frame may be on its way).

    Quiet for 2 s, not less: on a loaded two-core box a frame sent before the freeze was seen to
    reach one page more than half a second after the other."""
    text, since = shown(page), time.monotonic()
    while time.monotonic() - since < 2.0:
        page.wait_for_timeout(100)
        if shown(page) != text:
            text, since = shown(page), time.monotonic()
    return text


def agreed_text(first, second) -> str:
    """The text both pages settle on. Pages that missed or doubled a piece never agree: the test fails."""
    deadline = time.monotonic() + 30
    while (text := settled_text(first)) != (other := settled_text(second)):
        assert time.monotonic() < deadline, (text, other)
    return text


def stored_view(context, url: str) -> tuple[str, str]:
    """What a fresh page renders from the database: (text, status) of the last answer."""
    page = context.new_page()
    page.goto(url)
    answer = page.locator(LAST_ANSWER)
    result = answer.locator(".body").inner_text(), answer.get_attribute("data-status")
    page.close()
    return result


def last_answer_in_db(url: str) -> Message:
    conversation_id = url.rstrip("/").rsplit("/", 1)[1]
    return Message.objects.filter(conversation_id=conversation_id, role="assistant").latest("id")


def test_closed_page_answer_goes_on_and_a_new_page_continues_it(context, llama, endless):
    first = context.new_page()
    log_in(first, make_user())
    long_answer_streaming(first, 0, endless)
    url = first.url
    with llama_paused(llama):
        so_far = settled_text(first)
        first.close()
        second = context.new_page()
        second.goto(url)
        answer = second.locator(LAST_ANSWER)
        # The snapshot: exactly what the closed page showed, still being written, Stop offered.
        expect(answer.locator(".body")).to_have_text(so_far, use_inner_text=True)  # as shown: <br> counts
        expect(answer).to_have_attribute("data-status", "streaming")
        expect(second.locator("#stop")).to_be_visible()
    # Its end: the chat's 1024 answer tokens (the endless profile runs to them), which a loaded two-core
    # box was seen to need over two minutes for.
    expect(answer).not_to_have_attribute("data-status", "streaming", timeout=300_000)
    final = shown(second)
    assert len(final) > len(so_far)  # it went on live on the new page
    message = last_answer_in_db(url)
    assert message.status == "complete" and not message.error  # closing the page did not end it
    assert answer.get_attribute("data-status") == message.status
    assert stored_view(context, url) == (final, "complete")


def test_two_pages_show_one_stream_and_stop_from_the_second_stops_both(context, llama, endless):
    user = make_user()
    first = context.new_page()
    log_in(first, user)
    with queue_slots_held(endless.name, 2):
        first.select_option("#profile", endless.name)
        first.fill("#prompt", "Write a long story about a lighthouse keeper.")
        first.keyboard.press("Enter")
        expect(first.locator(LAST_ANSWER)).to_have_attribute("data-status", "streaming")
        first.wait_for_function("() => location.pathname.startsWith('/c/')")
        second = context.new_page()
        second.goto(first.url)
        expect(second.locator(LAST_ANSWER)).to_have_attribute("data-status", "streaming")
        expect(second.locator("#stop")).to_be_visible()
    for page in (first, second):
        page.wait_for_function(
            "() => [...document.querySelectorAll('article.assistant')].pop().querySelector('.body').textContent.length > 0",
            timeout=60_000,
        )

    conversation_id = first.url.rstrip("/").rsplit("/", 1)[1]
    with contextlib.ExitStack() as kept_open:
        # Paused at once: the answer is still being written (the stranger's log-in takes seconds).
        with llama_paused(llama):
            # Someone else cannot watch it, nor stop it.
            stranger = kept_open.enter_context(chat_socket(login(make_user())))
            send(stranger, type="subscribe", conversation=conversation_id)
            refused = json.loads(stranger.recv(timeout=10))
            assert refused["type"] == "error" and "does not exist" in refused["message"]
            send(stranger, type="stop", conversation=conversation_id)

            agreed_text(first, second)
            expect(first.locator(LAST_ANSWER)).to_have_attribute("data-status", "streaming")
            second.click("#stop")
            for page in (first, second):
                expect(page.locator(LAST_ANSWER)).to_have_attribute("data-status", "stopped", timeout=10_000)
                expect(page.locator(LAST_ANSWER).locator(".badge.stopped")).to_be_visible()
                expect(page.locator("#stop")).to_be_hidden()
        assert shown(first) == shown(second)
        assert stored_view(context, first.url) == (shown(first), "stopped")
        assert last_answer_in_db(first.url).status == "stopped"
        with pytest.raises(TimeoutError):
            stranger.recv(timeout=0.5)  # nothing of the answer ever reached the stranger


def test_page_whose_socket_drops_reconnects_by_itself_and_continues(context, llama, endless):
    """The socket is cut under the page (Playwright stands between page and server); the page
    reconnects on its own, gets the snapshot and goes on live with the same answer."""
    sockets = []

    def through(route) -> None:
        sockets.append(route)
        route.connect_to_server()

    page = context.new_page()
    page.route_web_socket("**/ws/chat/", through)
    log_in(page, make_user())
    answer = long_answer_streaming(page, 0, endless)
    with llama_paused(llama):
        text = settled_text(page)
        sockets[-1].close()
        page.wait_for_function("() => document.getElementById('chat').dataset.connected !== '1'")
        page.wait_for_function("() => document.getElementById('chat').dataset.connected === '1'", timeout=30_000)
        assert len(sockets) == 2
        expect(answer.locator(".body")).to_have_text(text, use_inner_text=True)
        expect(answer).to_have_attribute("data-status", "streaming")
        expect(page.locator("#stop")).to_be_visible()
    page.wait_for_function(
        "(n) => [...document.querySelectorAll('article.assistant')].pop().querySelector('.body').textContent.length > n",
        arg=len(text),
        timeout=60_000,
    )
    with llama_paused(llama):  # Stop, unless the answer had already come to its end
        page.evaluate("() => document.getElementById('stop').click()")
        expect(answer).not_to_have_attribute("data-status", "streaming", timeout=10_000)
    assert stored_view(context, page.url) == (shown(page), answer.get_attribute("data-status"))
    assert last_answer_in_db(page.url).status == answer.get_attribute("data-status")
