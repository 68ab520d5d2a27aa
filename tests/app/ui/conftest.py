"""The page's browser tests' fixtures: a ``ragtime serve`` process per module, one headless
Chromium per module, and a fresh page per test that records every request it makes and fails
the test on any script error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page

from tests.helpers.browser import chromium
from tests.helpers.page import WAIT_MS, script_error, serve


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
