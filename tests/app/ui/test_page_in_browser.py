"""The page in a real browser (Debian's Chromium, headless) against ``ragtime serve`` as a
process on the null backend: it loads with no request leaving ragtime, a question asked from
the keyboard streams with its citations shown before the first token, the answer's trust
signals are said in words beside their fields, the waterfall shows every stage of the ``done``
event (in words, its code name beside), a search sends its mode and filters, refusals and 504s
are said in words, and axe-core finds no accessibility violation. ``test_page_reading.py``
checks what a reader reads: the answer's Markdown, safely, and its sources and waterfall."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.helpers.page import (
    JAEGER,
    QUESTION,
    WAIT_MS,
    ask_from_the_keyboard,
    open_page,
    serve,
    type_key_from_the_keyboard,
    violations,
)
from tests.helpers.sse import parse_sse

pytestmark = pytest.mark.process


def test_the_page_loads_with_no_request_leaving_ragtime(
    page: Page, server: str, requests_seen: list[str], api_key: str
) -> None:
    open_page(page, server)
    type_key_from_the_keyboard(page, api_key)
    assert requests_seen and all(u.startswith(f"{server}/") for u in requests_seen), requests_seen
    assert f"{server}/v1/collections" in requests_seen
    assert page.locator("#budget").input_value() == "15000"  # the server's default
    assert page.is_checked("input[name=mode][value=hybrid]")  # RAGTIME_SEARCH_MODE's default
    assert violations(page) == []


def test_a_question_streams_its_sources_first_then_the_answer_and_its_waterfall(
    page: Page, server: str, requests_seen: list[str], api_key: str
) -> None:
    open_page(page, server)
    type_key_from_the_keyboard(page, api_key)
    ask_from_the_keyboard(page, QUESTION, budget_ms=8000)
    expect(page.locator("#ask-status")).to_contain_text("Done in")
    events = parse_sse(page.evaluate("window.__askStream").splitlines())
    (citations,) = [data for name, data in events if name == "citations"]
    (done,) = [data for name, data in events if name == "done"]
    tokens = "".join(data["text"] for name, data in events if name == "token")

    answer = page.locator("#answer")
    assert tokens and answer.get_attribute("data-markdown") == tokens  # the Markdown as sent
    assert (answer.text_content() or "").split() == tokens.split()  # drawn: one paragraph
    assert page.evaluate("window.__firstContent") == ["citations", "answer"]
    labels = page.locator("#citations li").evaluate_all("items => items.map(i => i.value)")
    assert labels == [c["label"] for c in citations["citations"]] and labels
    rows = page.locator("table.waterfall tbody tr[data-stage]")
    assert rows.evaluate_all("rows => rows.map(r => r.dataset.stage)") == [
        stage["stage"] for stage in done["stages"]
    ]
    assert {"auth", "embed", "search", "generate"} <= {s["stage"] for s in done["stages"]}
    hop = page.locator("table.waterfall tr[data-stage='moderate.question'] th")
    expect(hop).to_have_text("checking your question moderate.question")
    expect(hop.locator("code")).to_have_text("moderate.question")
    trust = page.locator("dl.trust dd code").all_text_contents()
    assert trust == [
        f"answer_mode: {done['answer_mode']}",
        f"answerable: {json.dumps(done['answerable'])}",  # true, false, null: as JSON says them
        f"grounded: {json.dumps(done['grounded'])}",
        f"attribution: {done['attribution']}",
    ]
    caption = page.locator("table.waterfall caption").text_content() or ""
    assert f"of {done['budget']['budget_ms']:.1f} ms" in caption
    link = page.locator(".trace a")
    assert link.get_attribute("href") == f"{JAEGER}/trace/{done['trace_id']}"
    assert all(u.startswith(f"{server}/") for u in requests_seen), requests_seen
    assert violations(page) == []


def test_a_search_sends_its_mode_and_filters_and_shows_the_hits(
    page: Page, server: str, api_key: str
) -> None:
    open_page(page, server)
    type_key_from_the_keyboard(page, api_key)
    page.fill("#query", "exceptions")
    page.check("input[name=mode][value=keyword]")
    page.fill("#source-prefix", "tutorial/errors")
    page.fill("#kind", "rst")
    with page.expect_request(f"{server}/v1/search") as sent:
        page.click("#search-button")
    expect(page.locator("#search-status")).to_contain_text("passages in")
    body = sent.value.post_data_json
    assert body is not None
    assert (body["mode"], body["source_prefix"], body["kind"]) == (
        "keyword",
        "tutorial/errors",
        "rst",
    )
    sources = page.locator("#hits .source").all_text_contents()
    assert sources and all("tutorial/errors" in s for s in sources), sources
    assert page.locator("#search-report table.waterfall tr[data-stage=keyword]").count() == 1


def test_a_key_the_server_refuses_is_said_in_words(page: Page, server: str) -> None:
    open_page(page, server)
    type_key = page.locator("#key")
    type_key.fill("rt_not-a-key")
    type_key.press("Enter")
    expect(page.locator("#collections-status")).to_contain_text("The key was not accepted")


@pytest.fixture(scope="module")
def slow_server(seeded_data_dir: Path) -> Iterator[str]:
    """Every answer token takes 200 ms and the plan is not cut to fit (an engine slower than
    any budget here), and one request at a time is served."""
    yield from serve(
        seeded_data_dir,
        fault_generate_token_delay_ms="200",
        degradation_policy="false",
        max_in_flight="1",
    )


def test_a_504_is_said_in_words(page: Page, slow_server: str, api_key: str) -> None:
    open_page(page, slow_server)
    type_key_from_the_keyboard(page, api_key)
    ask_from_the_keyboard(page, QUESTION, budget_ms=1000)
    status = page.locator("#ask-status")
    expect(status).to_contain_text("Out of time (504)")
    assert "error" in (status.get_attribute("class") or "")


def test_a_refusal_at_the_door_is_said_in_words(page: Page, slow_server: str, api_key: str) -> None:
    """With the one slot held by a long answer, the page's question is refused at the door."""
    holding = threading.Event()
    release = threading.Event()

    def hold_the_slot() -> None:
        body = {"question": QUESTION, "stream": True, "budget_ms": 60_000}
        headers = {"Authorization": f"Bearer {api_key}"}
        with httpx.stream(
            "POST", f"{slow_server}/v1/ask", json=body, headers=headers, timeout=60
        ) as response:
            for line in response.iter_lines():
                if line.startswith("event: token"):
                    holding.set()
                    release.wait(WAIT_MS / 1000)
                    return

    holder = threading.Thread(target=hold_the_slot, daemon=True)
    holder.start()
    try:
        assert holding.wait(WAIT_MS / 1000), "the long answer never started"
        open_page(page, slow_server)
        type_key_from_the_keyboard(page, api_key)
        ask_from_the_keyboard(page, QUESTION)
        expect(page.locator("#ask-status")).to_contain_text("Refused before any work")
        expect(page.locator("#ask-status")).to_contain_text("Try again in")
    finally:
        release.set()
        holder.join(timeout=30)
