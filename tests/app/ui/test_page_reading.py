"""What a reader reads on the page, in a real browser (Debian's Chromium, headless) against
``ragtime serve`` on the null backend: the answer's Markdown drawn, and a model's or a
document's HTML shown as text, never run; ``[n]`` as links that open their source; each source
with why it is there in words, its raw scores aside and its text behind a disclosure; the
waterfall's hops readable on a stretched axis with a ruler, and red only where the server says
a hop ran past its allocation. Some tests rewrite what /v1/ask streams to the page (a route in
the browser): the real server's events, with a hostile answer or a violation put in."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Page, Route, expect

from tests.helpers.page import (
    QUESTION,
    ask_from_the_keyboard,
    open_page,
    type_key_from_the_keyboard,
    violations,
)
from tests.helpers.sse import parse_sse

pytestmark = pytest.mark.process

Events = list[tuple[str, Any]]
#: A model answer holding Markdown, HTML that would run if it were drawn as markup (split across
#: deltas as a stream splits it), a link and an image elsewhere, and a label with no source.
HOSTILE_ANSWER = [
    "Give it a **default** value: `def f(x=1)` [1].\n\n",
    "<img src=x onerror=\"window.__ran = 'img'\">\n\n",
    "Then <scr",
    "ipt>window.__ran = 'script'</script> and ",
    "<b onclick=\"window.__ran = 'b'\">bold</b>.\n\n",
    "See [this](https://elsewhere.invalid/) and ",
    "![a picture](https://elsewhere.invalid/p.png) [9].\n",
]
#: A document's passage, title and section holding the same.
HOSTILE_PASSAGE = (
    "<img src=x onerror=\"window.__ran = 'passage'\"><script>window.__ran = 1</script>"
)
RED = "rgb(179, 38, 30)"  # --over in ragtime.css


def as_sse(events: Events) -> str:
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)


def rewrite_the_answer(page: Page, rewrite: Callable[[Events], Events]) -> None:
    """The page's next /v1/ask gets the real server's events, rewritten."""

    def handle(route: Route) -> None:
        response = route.fetch()
        events = rewrite(parse_sse(response.text().splitlines()))
        route.fulfill(status=200, content_type="text/event-stream", body=as_sse(events))

    page.route("**/v1/ask", handle)


def hostile(events: Events) -> Events:
    rewritten: Events = []
    for name, data in events:
        if name == "token":
            continue
        if name == "citations":
            data["citations"][0] |= {"text": HOSTILE_PASSAGE, "title": HOSTILE_PASSAGE}
        if name == "done":
            rewritten += [("token", {"text": delta}) for delta in HOSTILE_ANSWER]
        rewritten.append((name, data))
    return rewritten


def streamed(page: Page, event: str) -> Any:
    (data,) = [
        d for n, d in parse_sse(page.evaluate("window.__askStream").splitlines()) if n == event
    ]
    return data


def test_a_hostile_answer_and_passage_show_as_text_and_nothing_of_theirs_runs(
    page: Page, server: str, requests_seen: list[str], api_key: str
) -> None:
    open_page(page, server)
    type_key_from_the_keyboard(page, api_key)
    rewrite_the_answer(page, hostile)
    ask_from_the_keyboard(page, QUESTION, budget_ms=8000)
    expect(page.locator("#ask-status")).to_contain_text("Done in")

    area = page.locator("#answer-area")
    assert area.locator("img, script, iframe, [onerror], [onclick]").count() == 0
    assert page.evaluate("window.__ran") is None
    answer = page.locator("#answer")
    text = answer.text_content() or ""
    assert "<img src=x onerror=\"window.__ran = 'img'\">" in text
    assert "<script>window.__ran = 'script'</script>" in text
    assert "<b onclick=\"window.__ran = 'b'\">bold</b>" in text
    expect(answer.locator("strong")).to_have_text("default")  # the Markdown is drawn
    expect(answer.locator("code")).to_have_text("def f(x=1)")
    # [1] links to its source; [9] names none and stays text; no link leaves the page.
    expect(answer.locator("a")).to_have_count(1)
    expect(answer.locator("a.cite")).to_have_attribute("href", "#source-1")
    assert "[9]" in text and "this (https://elsewhere.invalid/)" in text
    assert "[image: a picture]" in text
    source = page.locator("#source-1")
    expect(source.locator(".title")).to_have_text(HOSTILE_PASSAGE)
    expect(source.locator(".passage .text")).to_have_text(HOSTILE_PASSAGE)

    # The [1] link, from the keyboard, opens its source's passage and moves the focus there.
    answer.locator("a.cite").focus()
    page.keyboard.press("Enter")
    expect(source.locator("details")).to_have_attribute("open", "")
    assert page.evaluate("document.activeElement.closest('li').id") == "source-1"
    assert page.evaluate("window.__ran") is None
    assert all(u.startswith(f"{server}/") and not u.endswith("/x") for u in requests_seen)
    assert violations(page) == []


FOUND_BY = {
    ("dense",): "close in meaning",
    ("keyword",): "matched your words",
    ("dense", "keyword"): "both: matched your words and close in meaning",
}


def test_each_source_says_why_it_is_there_and_opens_to_its_text(
    page: Page, server: str, api_key: str
) -> None:
    open_page(page, server)
    type_key_from_the_keyboard(page, api_key)
    ask_from_the_keyboard(page, QUESTION, budget_ms=8000)
    expect(page.locator("#ask-status")).to_contain_text("Done in")
    citations = streamed(page, "citations")["citations"]
    assert citations and all(c["text"] for c in citations)
    for c in citations:
        item = page.locator(f"#source-{c['label']}")
        why = item.locator(".why")
        expect(why).to_have_text(FOUND_BY[tuple(sorted(c["found_by"]))])
        tooltip = why.get_attribute("title") or ""
        assert f"score {c['score']} ({c['score_kind']}:" in tooltip, tooltip
        assert "score" not in item.inner_text()  # the raw scores are aside, not in the line
        if c["section"]:
            expect(item.locator(".section")).to_contain_text(c["section"].split(" > ")[-1])
        expect(item.locator(".passage .text")).not_to_be_visible()
        item.locator("summary").focus()
        page.keyboard.press("Enter")
        expect(item.locator(".passage .text")).to_have_text(c["text"])
        expect(item.locator(".passage .scores")).to_contain_text(f"score {c['score']}")


def test_a_keyword_searchs_hits_say_they_matched_your_words(
    page: Page, server: str, api_key: str
) -> None:
    open_page(page, server)
    type_key_from_the_keyboard(page, api_key)
    page.fill("#query", "exceptions")
    page.check("input[name=mode][value=keyword]")
    page.click("#search-button")
    expect(page.locator("#search-status")).to_contain_text("passages in")
    reasons = page.locator("#hits .why").all_text_contents()
    assert reasons and set(reasons) == {"matched your words"}
    assert all(
        "bm25" in (t or "")
        for t in page.locator("#hits .why").evaluate_all("spans => spans.map(s => s.title)")
    )


def one_violation(events: Events) -> Events:
    """`assemble` ran past its allocation; `generate` spent more than its allocation without
    the server calling it a violation (as a stage around the plan may): only the flag counts."""
    for name, data in events:
        if name == "done":
            for stage in data["stages"]:
                if stage["stage"] == "assemble":
                    stage["exceeded"] = True
                elif stage["stage"] == "generate":
                    stage |= {"spent_ms": 2 * stage["allocated_ms"], "exceeded": False}
    return events


def bar_spans(page: Page) -> dict[str, tuple[float, float]]:
    """Each hop's spent bar, as (left, width) shares of its track."""
    spans: dict[str, tuple[float, float]] = page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll(
             "#ask-report tr[data-stage]")].map((row) => {
           const track = row.querySelector(".track").getBoundingClientRect();
           const bar = row.querySelector(".spent").getBoundingClientRect();
           return [row.dataset.stage,
                   [(bar.left - track.left) / track.width, bar.width / track.width]];
         }))"""
    )
    return spans


def test_the_waterfall_reads_short_hops_on_a_ruler_and_paints_only_violations_red(
    page: Page, server: str, api_key: str
) -> None:
    open_page(page, server)
    type_key_from_the_keyboard(page, api_key)
    rewrite_the_answer(page, one_violation)
    ask_from_the_keyboard(page, QUESTION, budget_ms=8000)
    expect(page.locator("#ask-status")).to_contain_text("Done in")
    report = page.locator("#ask-report")

    over = report.locator("tr.over").evaluate_all("rows => rows.map(r => r.dataset.stage)")
    assert over == ["assemble"]
    colours = report.locator("tr[data-stage] .spent").evaluate_all(
        "bars => bars.map(b => [b.closest('tr').dataset.stage, getComputedStyle(b)])"
        ".map(([stage, style]) => [stage, style.backgroundColor])"
    )
    assert [stage for stage, colour in colours if colour == RED] == ["assemble"]
    assert "over" not in (report.locator("tr.total").get_attribute("class") or "")

    marks = report.locator(".ruler .mark")
    labels = marks.all_text_contents()
    assert len(labels) >= 3 and labels[0] == "0 ms" and labels[-1] == "8 s", labels
    lefts = marks.evaluate_all("ms => ms.map(m => parseFloat(m.style.left))")
    assert lefts == sorted(lefts) and lefts[-1] == 100

    stretched = bar_spans(page)
    hops = [stage for stage in stretched if stage != "generate"]
    assert all(stretched[stage][1] >= 0.009 for stage in hops), stretched
    # generate starts some 30 ms into an 8 s budget: far along the stretched axis, not to scale.
    assert stretched["generate"][0] >= 0.15, stretched
    report.locator(".to-scale").focus()
    page.keyboard.press("Space")
    expect(report.locator(".ruler-row")).to_contain_text("to scale")
    to_scale = bar_spans(page)
    assert to_scale["generate"][0] < 0.05, to_scale
    assert violations(page) == []
