"""The manual's maps agree with the code (issue 42 §4): its Layout page (``docs/layout.md``) names
every package of ours and every file or folder it names exists; the API page's route table
(``docs/api.md``, "Routes") lists every route the app serves and no other (as the app's OpenAPI
document, built from its routes, lists them). Read by parsing, as ``test_configuration_page.py``
reads the configuration table."""

from __future__ import annotations

import re
from pathlib import Path

from app.main import create_app
from app.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PACKAGES = ("app", "retrieval", "inference", "tracing", "bench")


def section(page: str, title: str) -> str:
    """The body of a page's ``## title`` section."""
    text = (DOCS / page).read_text()
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"{page} has no '## {title}' section"
    return match.group(1)


def layout() -> str:
    return (DOCS / "layout.md").read_text()


def named_paths(text: str) -> set[str]:
    """What the text names in backticks that reads as a path: a ``.py`` file or a ``folder/``."""
    return {
        token
        for token in re.findall(r"`([^`\s]+)`", text)
        if token.endswith(".py") or (token.endswith("/") and not token.startswith("/"))
    }


def test_the_layout_names_every_package() -> None:
    named = {path.rstrip("/").split("/")[-1] for path in named_paths(layout())}
    missing = sorted(
        init.parent.relative_to(ROOT).as_posix()
        for package in PACKAGES
        for init in (ROOT / package).rglob("__init__.py")
        if init.parent.name not in named
    )
    assert not missing, f"packages the Layout does not name: {missing}"


def test_every_file_and_folder_the_layout_names_exists() -> None:
    """A name may be written from the repository's root or within the package its line is
    about (``gate.py`` in ``app/frontdoor/``): it exists under some folder of ours."""
    folders = [ROOT, *(p for pkg in (*PACKAGES,
                                     "tests", "deploy", "docs", "benchmarks", "demo")
                       for p in [ROOT / pkg, *(ROOT / pkg).rglob("*")] if p.is_dir())]  # fmt: skip
    absent = sorted(
        name
        for name in named_paths(layout())
        if "*" not in name and not any((folder / name.rstrip("/")).exists() for folder in folders)
    )
    assert not absent, f"the Layout names what is not there: {absent}"


def api_table_routes() -> set[tuple[str, str]]:
    rows = [line for line in section("api.md", "Routes").splitlines() if line.startswith("|")]
    routes = set()
    for row in rows[2:]:
        method, _, path = row.split("|")[1].strip().strip("`").partition(" ")
        routes.add((method, path))
    return routes


def app_routes(tmp_path: Path) -> set[tuple[str, str]]:
    """What the app serves, as its OpenAPI document lists it (built, not started)."""
    app = create_app(Settings(data_dir=tmp_path))
    return {
        (method.upper(), path)
        for path, operations in app.openapi()["paths"].items()
        for method in operations
    }


def test_the_api_table_lists_every_route_and_no_other(tmp_path: Path) -> None:
    assert api_table_routes() == app_routes(tmp_path)
