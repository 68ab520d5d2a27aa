"""Driving the page in a real browser (``tests.helpers.browser``) against ``ragtime serve`` as a
process on the null backend: the server and the page's fixtures' helpers, the scripts a test
adds to the page to watch it, and the page used as a person uses it, from the keyboard."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import ConsoleMessage, Page, expect

from tests.helpers.ports import free_port
from tests.helpers.processes import start_server, stop, wait_ready

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
    """``ragtime serve`` on a free port of 127.0.0.1 (trace links to ``JAEGER``): its URL."""
    port = free_port()
    proc = start_server(data_dir, port, jaeger_url=JAEGER, **settings)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, proc)
        yield url
    finally:
        stop(proc)


def script_error(message: ConsoleMessage) -> bool:
    """An error the page's code logged; not Chromium's line for each response that was not a
    success, which the refusal tests cause on purpose."""
    return message.type == "error" and not message.text.startswith("Failed to load resource")


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
    """What axe-core finds wrong with the page as it stands, by rule and element."""
    found: list[dict[str, Any]] = Axe().run(page).response["violations"]
    return [{"id": v["id"], "nodes": [n["html"] for n in v["nodes"]]} for v in found]
