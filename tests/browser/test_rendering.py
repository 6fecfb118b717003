"""Answers as people see them (static/common/render.js): highlighted code with a copy button, styled tables,
TeX maths as MathML, a copy button on every message, and streaming whose DOM work per token does not grow
with the answer's length. Known Markdown goes in through the stored history and through the page's own
render function, so nothing depends on what the small model writes. Screenshots: var/artifacts/browser/."""

from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser.test_chat_page import log_in
from tests.support.client import base_url, make_user
from tests.support.page_checks import policy_violations, watch_policy

pytestmark = pytest.mark.usefixtures("web_server")

ARTIFACTS = Path(__file__).resolve().parents[2] / "var" / "artifacts" / "browser"

RICH_ANSWER = """Here is the code:

```python
def area(radius):
    return 3.14159 * radius ** 2  # circle
```

| Planet | Moons |
|--------|------:|
| Earth  | 1 |
| Mars   | 2 |

Energy is $E=mc^2$, money is $5 and $10, and `$not maths$` stays code.

$$
\\int_0^1 x^2\\,dx = \\frac{1}{3}
$$

Also \\(a_1 + b_1\\) and \\[ \\sum_{i=1}^{n} i = \\frac{n(n+1)}{2} \\]
"""


def screenshot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def stored_conversation(user, answer: str, title: str = "rendering"):
    from chat.models import Conversation, Message

    conversation = Conversation.objects.create(owner=user, title=title)
    Message.objects.create(conversation=conversation, role="user", content="show me everything")
    Message.objects.create(conversation=conversation, role="assistant", content=answer)
    return conversation


def clipboard(page) -> str:
    return page.evaluate("navigator.clipboard.readText()")


def test_stored_answer_renders_code_table_and_maths_with_copy_buttons(browser):
    user = make_user()
    conversation = stored_conversation(user, RICH_ANSWER)
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base_url())
    page = context.new_page()
    violations = watch_policy(page)
    log_in(page, user)
    page.goto(f"{base_url()}/c/{conversation.id}/")
    answer = page.locator("article.assistant .body")

    # Code: highlighted by highlight.js, with its language named and a copy button that copies the code.
    code = answer.locator(".code-block pre code.hljs.language-python")
    expect(code).to_have_count(1)
    expect(code.locator("span.hljs-keyword", has_text="def")).to_have_count(1)
    expect(code.locator("span.hljs-comment")).to_have_text("# circle")
    expect(answer.locator(".code-block .code-lang")).to_have_text("python")
    answer.locator(".code-block button.copy-code").click()
    expect(answer.locator(".code-block button.copy-code")).to_have_text("Copied")
    assert clipboard(page) == "def area(radius):\n    return 3.14159 * radius ** 2  # circle"

    # Table: inside a wrapper that scrolls sideways by itself, cells with borders, a shaded header row.
    table = answer.locator(".table-wrap > table")
    expect(table.locator("th")).to_have_count(2)
    cell = table.locator("td").first
    assert cell.evaluate("c => getComputedStyle(c).borderTopStyle") == "solid"
    assert answer.locator(".table-wrap").evaluate("w => getComputedStyle(w).overflowX") == "auto"
    header = table.locator("th").first.evaluate("c => getComputedStyle(c).backgroundColor")
    assert header not in ("rgba(0, 0, 0, 0)", "transparent")

    # Maths: MathML, inline and display, from both spellings; money and code spans untouched.
    expect(answer.locator(".math-inline > math")).to_have_count(2)
    expect(answer.locator(".math-display > math[display=block]")).to_have_count(2)
    expect(answer.locator(".math-inline math annotation").first).to_have_text("E=mc^2")
    assert answer.locator("math msup").count() >= 2  # c^2 and x^2 built, not shown as raw TeX
    text = answer.inner_text()
    assert "$E=mc^2$" not in text and "\\int" not in text and "\\(" not in text
    assert "money is $5 and $10" in text
    expect(answer.locator("code", has_text="$not maths$")).to_have_count(1)

    # Copy message: every message has one; it copies the text as written (the Markdown).
    expect(page.locator("article.message .copy-message")).to_have_count(2)
    page.locator("article.assistant .copy-message").click()
    expect(page.locator("article.assistant .copy-message")).to_have_text("Copied")
    assert clipboard(page) == RICH_ANSWER
    page.locator("article.user .copy-message").click()
    assert clipboard(page) == "show me everything"

    screenshot(page, "rendering-desktop")
    assert policy_violations(page, violations) == []
    context.close()


def test_render_function_keeps_model_markup_out_of_maths_and_code(browser):
    """The same function the chat uses: raw MathML, style-bearing or class-bearing markup from the model
    is removed; highlight classes survive only inside code blocks; broken TeX shows as written."""
    page = browser.new_page()
    log_in(page, make_user())
    page.evaluate(
        "s => { const out = document.createElement('div'); out.id = 'out';"
        " out.append(QwRender.renderMarkdown(s)); document.body.append(out); }",
        '<math><mi href="javascript:alert(1)">x</mi></math> <span class="hljs-keyword" style="color:red">k</span>'
        " $\\frac{1}{$ and $\\notacommand$\n\n```js\nlet a = 1;\n```",
    )
    out = page.locator("#out")
    assert out.locator("math").count() == 0
    assert out.locator("[style], [href]").count() == 0
    assert out.locator("p span.hljs-keyword").count() == 0
    assert out.locator("pre code span.hljs-keyword").count() == 1
    expect(out.locator("code.math-error")).to_have_text(["$\\frac{1}{$", "$\\notacommand$"])
    page.close()


# Feeds a synthetic 20,000-character answer to a markdownView in 25-character appends and counts, with a
# MutationObserver, the nodes added and removed per append (with their descendants: the DOM work).
# The control does the same counting for a full re-render (replaceChildren) at a few lengths.
STREAM_COST_JS = """
() => {
  const blocks = [];
  for (let i = 0; blocks.join("").length < 20000; i++) {
    blocks.push(
      `Paragraph ${i} has **bold**, a [link](https://example.org/${i}) and maths $x_${i}^2 + y$.\\n\\n`,
      `- item one of ${i}\\n- item two with \\`code\\`\\n\\n`,
      "```python\\n" + `def f${i}(x):\\n    return x * ${i}  # note\\n` + "```\\n\\n",
      `| n | square |\\n|---|---|\\n| ${i} | ${i * i} |\\n| ${i + 1} | ${(i + 1) ** 2} |\\n\\n`,
      `$$\\n\\\\sum_{k=1}^{${i}} k\\n$$\\n\\n`
    );
  }
  const text = blocks.join("").slice(0, 20000);
  const subtreeSize = (node) => {
    let count = 0;
    const walker = document.createTreeWalker(node, NodeFilter.SHOW_ALL);
    do count++; while (walker.nextNode());
    return count;
  };
  const work = (records) => records.reduce((sum, r) =>
    sum + [...r.addedNodes, ...r.removedNodes].reduce((n, node) => n + subtreeSize(node), 0), 0);
  const measure = (container, step) => {
    const observer = new MutationObserver(() => {});
    observer.observe(container, { childList: true, subtree: true, characterData: true });
    const counts = [];
    for (let end = 25; end < text.length + 25; end += 25) {
      step(text.slice(0, Math.min(end, text.length)));
      counts.push(work(observer.takeRecords()));
    }
    observer.disconnect();
    return counts;
  };
  const streamed = document.createElement("div");
  const view = QwRender.markdownView(streamed);
  const incremental = measure(streamed, (prefix) => view.update(prefix));
  // The control: a whole re-render, measured on the first and last 20 appends only (it is slow by design).
  const whole = document.createElement("div");
  const sample = (from) => {
    const counts = [];
    const observer = new MutationObserver(() => {});
    observer.observe(whole, { childList: true, subtree: true });
    for (let k = 0; k < 20; k++) {
      whole.replaceChildren(QwRender.renderMarkdown(text.slice(0, from + 25 * k)));
      counts.push(work(observer.takeRecords()));
    }
    observer.disconnect();
    return counts;
  };
  const full = document.createElement("div");
  full.append(QwRender.renderMarkdown(text));
  return {
    length: text.length,
    incremental,
    wholeStart: sample(25),
    wholeEnd: sample(text.length - 500),
    same: streamed.innerHTML === full.innerHTML, // as markup: text nodes may be split differently
  };
}
"""


def mean(values) -> float:
    return sum(values) / len(values)


def test_streaming_render_work_stays_flat_for_a_long_answer(browser):
    page = browser.new_page()
    log_in(page, make_user())
    result = page.evaluate(STREAM_COST_JS)
    counts = result["incremental"]
    tenth = len(counts) // 10
    start, end = mean(counts[:tenth]), mean(counts[-tenth:])
    print(
        f"render_nodes_per_append start={start:.1f} end={end:.1f} max={max(counts)} "
        f"full_rerender_start={mean(result['wholeStart']):.1f} full_rerender_end={mean(result['wholeEnd']):.1f}"
    )
    assert result["length"] == 20_000
    assert result["same"], "the streamed view must end equal to a full render of the same text"
    # Bounded by one block, not by the answer: the end costs what the start cost.
    assert end <= 2 * start + 20, (start, end)
    assert max(counts) < 400
    # The measure sees growth where there is some: a whole re-render near the end is many times dearer.
    assert mean(result["wholeEnd"]) > 20 * end
    page.close()


def test_copy_buttons_speak_chinese_to_a_chinese_browser(browser):
    user = make_user()
    conversation = stored_conversation(user, "```python\nprint(1)\n```")
    context = browser.new_context(locale="zh-CN", extra_http_headers={"Accept-Language": "zh-CN,zh;q=0.9"})
    page = context.new_page()
    log_in(page, user)
    page.goto(f"{base_url()}/c/{conversation.id}/")
    expect(page.locator("article.assistant .copy-message")).to_have_text("复制")
    expect(page.locator("article.assistant .copy-message")).to_have_attribute("aria-label", "复制消息")
    expect(page.locator("article.assistant .copy-code")).to_have_attribute("aria-label", "复制代码")
    expect(page.locator(".menu-toggle")).to_have_text("菜单")
    context.close()
