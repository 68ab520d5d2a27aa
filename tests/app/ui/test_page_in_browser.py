"""The page in a real browser (Debian's Chromium, headless) against ``ragtime serve`` as a
process on the null backend: it loads with no request leaving ragtime, a question asked from
the keyboard streams with its citations shown before the first token, the waterfall shows every
stage of the ``done`` event, a search sends its mode and filters, refusals and 504s are said in
words, and axe-core finds no accessibility violation."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, ConsoleMessage, Page, expect

from tests.helpers.browser import chromium
from tests.helpers.ports import free_port
from tests.helpers.processes import start_server, stop, wait_ready
from tests.helpers.sse import parse_sse

pytestmark = pytest.mark.process

QUESTION = "How do I define a function with a default value?"
JAEGER = "http://jaeger.invalid:16686"
#: Generous: the page waits on the server, which shares 2 cores with the rest of the suite.
WAIT_MS = 60_000
#: Records, in the page, the order in which the sources and the answer first showed content.
ORDER_OF_CONTENT = """
window.__firstContent = [];
document.addEventListener("DOMContentLoaded", () => {
  for (const id of ["citations", "answer"]) {
    const node = document.getElementById(id);
    new MutationObserver(() => {
      if (node.textContent.length > 0 && !window.__firstContent.includes(id)) {
        window.__firstContent.push(id);
      }
    }).observe(node, { childList: true, subtree: true, characterData: true });
  }
});
"""
#: Keeps a copy of what /v1/ask streams to the page (a tee: the page still reads it as it comes;
#: the DevTools protocol gives no body of a response read as a stream).
COPY_OF_THE_ANSWER_STREAM = """
window.__askStream = "";
const realFetch = window.fetch;
window.fetch = async (...args) => {
  const response = await realFetch(...args);
  if (!String(args[0]).endsWith("/v1/ask") || !response.ok) return response;
  const [forPage, forTest] = response.body.tee();
  (async () => {
    const reader = forTest.pipeThrough(new TextDecoderStream()).getReader();
    for (let part = await reader.read(); !part.done; part = await reader.read()) {
      window.__askStream += part.value;
    }
  })();
  const { status, statusText, headers } = response;
  return new Response(forPage, { status, statusText, headers });
};
"""


def serve(data_dir: Path, **settings: str) -> Iterator[str]:
    port = free_port()
    proc = start_server(data_dir, port, jaeger_url=JAEGER, **settings)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, proc)
        yield url
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def server(seeded_data_dir: Path) -> Iterator[str]:
    yield from serve(seeded_data_dir)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as browser:
        yield browser


@pytest.fixture
def requests_seen() -> list[str]:
    return []


def script_error(message: ConsoleMessage) -> bool:
    """An error the page's code logged; not Chromium's line for each response that was not a
    success, which the refusal tests cause on purpose."""
    return message.type == "error" and not message.text.startswith("Failed to load resource")


@pytest.fixture
def page(browser: Browser, requests_seen: list[str]) -> Iterator[Page]:
    """A fresh page (its own storage), recording every request it makes and failing the test
    on any script error."""
    context = browser.new_context()
    context.on("request", lambda request: requests_seen.append(request.url))
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda m: errors.append(m.text) if script_error(m) else None)
    page.set_default_timeout(WAIT_MS)
    try:
        yield page
    finally:
        context.close()
    assert not errors, errors


def open_page(page: Page, url: str) -> None:
    page.add_init_script(ORDER_OF_CONTENT)
    page.add_init_script(COPY_OF_THE_ANSWER_STREAM)
    page.goto(f"{url}/")
    page.wait_for_selector("body[data-ready=true]")


def type_key_from_the_keyboard(page: Page, api_key: str) -> None:
    """Tab to the key field (past the skip link), type it, Enter: the collections load."""
    for _ in range(4):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "key":
            break
    assert page.evaluate("document.activeElement.id") == "key"
    page.keyboard.type(api_key)
    page.keyboard.press("Enter")
    expect(page.locator("#collection option[value=demo]")).to_have_count(1)


def tab_to(page: Page, element_id: str) -> None:
    for _ in range(20):
        if page.evaluate("document.activeElement.id") == element_id:
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"#{element_id} is not reachable with Tab")


def ask_from_the_keyboard(page: Page, question: str, budget_ms: int | None = None) -> None:
    if budget_ms is not None:
        page.fill("#budget", str(budget_ms))
    page.focus("#key")
    tab_to(page, "question")
    page.keyboard.type(question)
    page.keyboard.press("Enter")


def violations(page: Page) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = Axe().run(page).response["violations"]
    return [{"id": v["id"], "nodes": [n["html"] for n in v["nodes"]]} for v in found]


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

    assert tokens and page.locator("#answer").text_content() == tokens
    assert page.evaluate("window.__firstContent") == ["citations", "answer"]
    labels = page.locator("#citations li").evaluate_all("items => items.map(i => i.value)")
    assert labels == [c["label"] for c in citations["citations"]] and labels
    rows = page.locator("table.waterfall tbody tr[data-stage]")
    assert rows.evaluate_all("rows => rows.map(r => r.dataset.stage)") == [
        stage["stage"] for stage in done["stages"]
    ]
    assert {"auth", "embed", "search", "generate"} <= {s["stage"] for s in done["stages"]}
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
