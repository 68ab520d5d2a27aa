"""The page is served by ragtime itself, from files in the package: / sends browsers to it, its
document allows nothing but this server (Content-Security-Policy), every file it names is here,
the libraries it ships (``static/vendor/``) are the packages' own files at the versions noted,
and its settings come from the server's. ``RAGTIME_UI=false`` serves none of it."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from app.ui.page import STATIC
from tests.fakes.backends import ScriptedBackend
from tests.helpers.app import running_app

#: What the page's files may reference: their own paths, and nothing with a scheme or a host.
LOCAL = re.compile(r"^(/ui/static/[\w.-]+|\./(vendor/)?[\w.-]+\.m?js|data:,)$")
VENDOR = STATIC / "vendor"


def test_the_root_sends_browsers_to_the_page(seeded_data_dir: Path) -> None:
    with running_app(seeded_data_dir, backend=ScriptedBackend()) as client:
        for path in ("/", "/ui"):
            response = client.get(path, follow_redirects=False)
            assert response.status_code == 307 and response.headers["location"] == "/ui/", path
        page = client.get("/ui/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "connect-src 'self'" in policy
    assert "script-src 'self'" in policy and "'unsafe-inline'" not in policy
    assert "<title>ragtime</title>" in page.text


def test_every_file_the_page_names_is_served_from_the_package(seeded_data_dir: Path) -> None:
    with running_app(seeded_data_dir, backend=ScriptedBackend()) as client:
        html = client.get("/ui/").text
        named = re.findall(r'(?:src|href)="([^"#]+)"', html)
        scripts = [p.name for p in STATIC.glob("*.js")]
        imported = {
            name: re.findall(r'from "([^"]+)"', (STATIC / name).read_text()) for name in scripts
        }
        served = {path: client.get(path) for path in named if path.startswith("/ui/static/")}
        served |= {f"/ui/static/{n}": client.get(f"/ui/static/{n}") for n in scripts}
        vendored = {
            f"/ui/static/{path}": client.get(f"/ui/static/{path}")
            for imports in imported.values()
            for path in imports
            if path.startswith("./vendor/")
        }
    assert named and all(LOCAL.match(path) for path in named), named
    for name, imports in imported.items():
        assert all(LOCAL.match(path) for path in imports), (name, imports)
        assert all((STATIC / path.removeprefix("./")).exists() for path in imports), imports
    assert {path: r.status_code for path, r in served.items()} == dict.fromkeys(served, 200)
    assert served["/ui/static/ragtime.js"].headers["content-type"].startswith("text/javascript")
    assert {p.rsplit("/", 1)[1] for p in vendored} == {"marked.esm.js", "purify.es.mjs"}
    for path, response in vendored.items():
        assert response.status_code == 200, path
        assert response.headers["content-type"].startswith("text/javascript"), path
    for text in [html, *((STATIC / n).read_text() for n in [*scripts, "ragtime.css"])]:
        assert not re.search(r"https?://(?!localhost)", text), "the page names another host"


def test_the_vendored_libraries_are_the_packages_files_at_the_versions_noted() -> None:
    """Each file of ``vendor/`` has its licence beside it and its version and hash noted in
    ``vendor/README.md``; a file changed or updated without its note fails here."""
    noted = {
        name: (version, digest)
        for name, version, digest in re.findall(
            r"^\| `([\w.-]+)` \|[^|]*\| ([\d.]+) \|[^|]*\| `([0-9a-f]{64})` \|$",
            (VENDOR / "README.md").read_text(),
            re.MULTILINE,
        )
    }
    shipped = {p.name for p in VENDOR.iterdir() if p.suffix in {".js", ".mjs"}}
    assert set(noted) == shipped == {"marked.esm.js", "purify.es.mjs"}
    for name, (version, digest) in noted.items():
        text = (VENDOR / name).read_bytes()
        assert hashlib.sha256(text).hexdigest() == digest, name
        assert version.encode() in text[:400], (name, version)  # the file's own banner
    assert "Permission is hereby granted, free of charge" in (VENDOR / "LICENSE.marked").read_text()
    assert "Apache License" in (VENDOR / "LICENSE.dompurify").read_text()


def test_the_page_reads_the_servers_settings(seeded_data_dir: Path) -> None:
    with running_app(
        seeded_data_dir,
        backend=ScriptedBackend(),
        budget_ms_default=4000,
        search_mode="keyword",
        jaeger_url="http://jaeger.internal:16686/",
    ) as client:
        config = client.get("/ui/config.json").json()
    assert config["budget_ms"]["default"] == 4000
    assert config["search_mode"] == "keyword"
    assert "demo" not in str(config)  # collections are named only to keys that may read them
    assert config["jaeger_url"] == "http://jaeger.internal:16686"


def test_the_page_can_be_turned_off(seeded_data_dir: Path) -> None:
    with running_app(seeded_data_dir, backend=ScriptedBackend(), ui=False) as client:
        assert client.get("/ui/").status_code == 404
        assert client.get("/ui/static/ragtime.js").status_code == 404
        assert client.get("/", follow_redirects=False).status_code == 404


def test_the_collection_picker_learns_the_default_from_the_keys_own_listing(
    seeded_data_dir: Path, auth: dict[str, str]
) -> None:
    """The page preselects the collection a request without one reads; only a key that may
    read it is told its name."""
    with running_app(seeded_data_dir, backend=ScriptedBackend()) as client:
        listed = client.get("/v1/collections", headers=auth).json()["collections"]
    assert [(c["name"], c["default"]) for c in listed] == [("demo", True)]
