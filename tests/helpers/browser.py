"""A real browser for the page's tests: Debian's Chromium (``make test`` installs it), driven
headless through Playwright over the DevTools protocol. Playwright's own browser download is
never run; axe-core (shipped in axe-playwright-python's wheel) checks accessibility."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager

from playwright.sync_api import Browser, sync_playwright

#: Nothing of Chromium's own reaches out: no updates, no sync, no field trials, no QUIC probes.
QUIET = [
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
    "--disable-gpu",
]


@contextmanager
def chromium() -> Iterator[Browser]:
    """A headless Chromium, closed after the block."""
    executable = shutil.which("chromium")
    assert executable is not None, "chromium is not installed (make test installs it)"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=QUIET)
        try:
            yield browser
        finally:
            browser.close()
