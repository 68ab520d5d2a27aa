"""Takes the README's pictures of the page (``make screenshots``): a running ragtime (``make
serve``, the offline default: MiniLM and SmolLM2 on the CPU) asked the README's question, and a
keyword search, in Debian's headless Chromium driven by Playwright (the test extra). The answer's
picture opens the first source it cites, as a reader checks it.

    python docs/screenshots.py [--url http://127.0.0.1:8000] [--key-file .ragtime/demo-api-key]
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from playwright.sync_api import Page, expect, sync_playwright

HERE = Path(__file__).parent
QUESTION = "How do I give a function parameter a default value?"
#: The budget the picture draws the request against.
BUDGET_MS = 4000
WAIT_MS = 300_000  # the CPU default answers in seconds; a busy machine may take longer


def use_key(page: Page, url: str, key: str) -> None:
    page.goto(f"{url}/")
    page.wait_for_selector("body[data-ready=true]")
    page.fill("#key", key)
    page.press("#key", "Enter")
    expect(page.locator("#collection option")).not_to_have_count(0, timeout=WAIT_MS)


def answered(page: Page, url: str, key: str, path: Path) -> None:
    use_key(page, url, key)
    page.fill("#budget", str(BUDGET_MS))
    page.fill("#question", QUESTION)
    page.press("#question", "Enter")
    expect(page.locator("#ask-status")).to_contain_text("Done in", timeout=WAIT_MS)
    # The first source the answer cites, opened from its [n] as a reader checks it.
    cite = page.locator("#answer a.cite").first
    if cite.count():
        cite.click()
    else:
        page.locator("#citations summary").first.click()
    section = page.locator("section").first.bounding_box()
    assert section is not None
    bottom = section["y"] + section["height"] + 10
    page.screenshot(
        path=path, full_page=True, clip={"x": 0, "y": 0, "width": 1100, "height": bottom}
    )


def searched(page: Page, url: str, key: str, path: Path) -> None:
    use_key(page, url, key)
    page.fill("#query", "KeyboardInterrupt")
    page.check("input[name=mode][value=keyword]")
    page.fill("#k", "3")
    page.click("#search-button")
    expect(page.locator("#search-status")).to_contain_text("passages in", timeout=WAIT_MS)
    page.locator("#search-heading").scroll_into_view_if_needed()
    page.locator("section").nth(1).screenshot(path=path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--key-file", type=Path, default=Path(".ragtime/demo-api-key"))
    parser.add_argument("--out", type=Path, default=HERE / "images")
    args = parser.parse_args()
    key = args.key_file.read_text().strip()
    args.out.mkdir(parents=True, exist_ok=True)
    executable = shutil.which("chromium")
    assert executable, "chromium is not installed (make test installs it)"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable)
        page = browser.new_page(viewport={"width": 1100, "height": 1400})
        answered(page, args.url, key, args.out / "page-answer.png")
        searched(page, args.url, key, args.out / "page-search.png")
        browser.close()
    print(f"wrote {args.out / 'page-answer.png'} and {args.out / 'page-search.png'}")


if __name__ == "__main__":
    main()
