"""``/docs`` renders on a machine that reaches no network: Swagger UI's assets come from the
pinned ``fastapi-offline`` package. A headless Chromium (Debian's, which ``make test``
installs) loads the page from the running app and lists the API's operations."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.fakes.backends import ScriptedBackend
from tests.helpers.app import build_app, served

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def test_the_page_and_its_assets_are_served_here(seeded_data_dir: Path) -> None:
    with served(build_app(seeded_data_dir, backend=ScriptedBackend())) as url:
        page = httpx.get(f"{url}/docs", timeout=10)
        assets = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        fetched = {a: httpx.get(url + a, timeout=10).status_code for a in assets if "/" in a}
    assert page.status_code == 200
    assert assets and all(a.startswith("/docs/assets/") for a in assets), assets
    assert fetched and set(fetched.values()) == {200}, fetched


@pytest.mark.process
def test_a_browser_lists_the_operations(seeded_data_dir: Path, tmp_path: Path) -> None:
    chromium = shutil.which("chromium")
    assert chromium is not None, "chromium is not installed (make test installs it)"
    with served(build_app(seeded_data_dir, backend=ScriptedBackend())) as url:
        dom = subprocess.run(
            [
                chromium,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={tmp_path / 'profile'}",
                "--virtual-time-budget=20000",
                "--dump-dom",
                f"{url}/docs",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
    operations = set(re.findall(r'data-path="([^"]+)"', dom))
    assert {"/v1/ask", "/v1/search", "/v1/chat/completions"} <= operations, dom[-2000:]
