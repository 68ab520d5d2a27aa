"""Documents as they come, over HTTP (issue 23 §3): an uploaded e-mail's attachments are
sources of their own whose hits and citations name the message; an uploaded byte-identical copy
is reported as a copy, not a failure, and ``/v1/search`` finds its text under both names."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.fakes.backends import ScriptedBackend
from tests.helpers.app import create_key, running_app
from tests.helpers.carried_documents import PDF_TEXT, XLSX_ROW, make_thread

pytestmark = pytest.mark.process

TEA = b"# Tea\n\nGreen tea steeps for two minutes at eighty degrees.\n"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    data_dir = tmp_path_factory.mktemp("as-they-come")
    with running_app(data_dir, backend=ScriptedBackend(), max_upload_bytes=1_000_000) as client:
        client.headers["Authorization"] = f"Bearer {create_key(data_dir, 'docs')}"
        yield client


def _search(client: TestClient, collection: str, query: str, **more: Any) -> list[dict[str, Any]]:
    response = client.post("/v1/search", json={"query": query, "collection": collection, **more})
    assert response.status_code == 200, response.text
    hits: list[dict[str, Any]] = response.json()["passages"]
    return hits


def test_an_uploaded_mail_brings_its_attachments(client: TestClient, tmp_path: Path) -> None:
    mail = make_thread(tmp_path / "thread.eml").read_bytes()
    response = client.post(
        "/v1/collections/mail/documents",
        files=[("file", ("thread.eml", mail, "message/rfc822"))],
    )
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["sources"] == [
        "thread.eml",
        "thread.eml#report.pdf",
        "thread.eml#catering.docx",
        "thread.eml#hangars.xlsx",
        "thread.eml#zoo.csv",
    ]
    assert [f["source"] for f in body["failures"]] == ["thread.eml#chart.png"]
    assert body["files"] == 1 and body["copies"] == []
    [hit] = _search(client, "mail", PDF_TEXT, k=1)
    assert (hit["source"], hit["message"], hit["kind"]) == (
        "thread.eml#report.pdf",
        "thread.eml",
        "pdf",
    )
    [hit] = _search(client, "mail", " ".join(XLSX_ROW), k=1, kind="xlsx")
    assert (hit["source"], hit["message"]) == ("thread.eml#hangars.xlsx", "thread.eml")
    [hit] = _search(client, "mail", "inspection papers board", k=1, source_prefix="thread.eml")
    assert (hit["source"], hit["message"]) == ("thread.eml", None)
    # The answer's citations name the message too.
    asked = client.post(
        "/v1/ask", json={"question": "What did the turbine inspection find?", "collection": "mail"}
    )
    assert asked.status_code == 200, asked.text
    cited = {c["source"]: c["message"] for c in asked.json()["citations"]}
    assert cited["thread.eml#report.pdf"] == "thread.eml"


def test_an_uploaded_copy_is_reported_and_searchable_under_both_names(
    client: TestClient,
) -> None:
    first = client.post(
        "/v1/collections/tea/documents", files=[("file", ("tea.md", TEA, "text/markdown"))]
    )
    assert first.status_code == 201, first.text
    copy = client.post(
        "/v1/collections/tea/documents", files=[("file", ("green.md", TEA, "text/markdown"))]
    )
    assert copy.status_code == 201, copy.text  # not "every chunk is a duplicate"
    body = copy.json()
    assert body["copies"] == [{"source": "green.md", "of": "tea.md"}]
    assert body["failures"] == [] and body["sources"] == ["green.md"] and body["chunks"] == 0
    [hit] = _search(client, "tea", "green tea steeps", k=1)
    assert (hit["source"], hit["also"]) == ("tea.md", ["green.md"])
    [hit] = _search(client, "tea", "green tea steeps", k=1, source_prefix="green.md")
    assert (hit["source"], hit["also"]) == ("green.md", ["tea.md"])
    # Two copies in one upload: the second copies the first.
    both = client.post(
        "/v1/collections/tea/documents",
        files=[
            ("file", ("x.txt", b"Kettles boil water.\n", "text/plain")),
            ("file", ("y.txt", b"Kettles boil water.\n", "text/plain")),
        ],
    )
    assert both.status_code == 201 and both.json()["copies"] == [{"source": "y.txt", "of": "x.txt"}]
