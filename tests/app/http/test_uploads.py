"""Documents uploaded over HTTP (``POST /v1/collections/{name}/documents``): ingested into the
running service, searchable at once by the key that may read the collection; every refusal
(scope, collection, size, type, body) is a clear 4xx that ingests nothing."""

from __future__ import annotations

import asyncio
import errno
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from retrieval import SUPPORTED_SUFFIXES
from retrieval.store.writer import SnapshotWriter
from tests.fakes.backends import ScriptedBackend
from tests.fakes.hash_embedder import HashEmbedder
from tests.helpers.app import app_state, asgi_client, build_app, create_key, running_app

NOTES = (
    "# Tea\n\nGreen tea steeps for two minutes at eighty degrees; black tea for four minutes "
    "in boiling water. Oolong sits between them.\n"
)
LIMIT = 4096


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("uploads")


@pytest.fixture(scope="module")
def client(data_dir: Path) -> Iterator[TestClient]:
    with running_app(data_dir, backend=ScriptedBackend(), max_upload_bytes=LIMIT) as client:
        yield client


def _auth(data_dir: Path, scopes: list[str], collections: list[str] | None) -> dict[str, str]:
    secret = create_key(data_dir, "up", scopes=scopes, collections=collections)
    return {"Authorization": f"Bearer {secret}"}


@pytest.fixture(scope="module")
def writer(data_dir: Path) -> dict[str, str]:
    """``ask`` and ``ingest`` on collections ``tea`` and ``more`` (which do not exist yet)."""
    return _auth(data_dir, ["ask", "ingest"], ["tea", "more"])


def _collections(client: TestClient) -> dict[str, int]:
    held: dict[str, int] = app_state(client).services.store.collections()
    return held


def _error(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    return error


def test_json_text_is_ingested_and_searchable_by_its_key(
    client: TestClient, writer: dict[str, str], data_dir: Path
) -> None:
    response = client.post(
        "/v1/collections/tea/documents",
        json={"source": "notes/tea.md", "text": NOTES},
        headers=writer,
    )
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["collection"] == "tea" and body["files"] == 1 and body["chunks"] >= 1
    assert body["sources"] == ["tea.md"] and body["failures"] == []
    hits = client.post(
        "/v1/search", json={"query": "how long does green tea steep", "collection": "tea"},
        headers=writer,
    ).json()["passages"]  # fmt: skip
    assert hits and hits[0]["source"] == "tea.md" and "eighty degrees" in hits[0]["text"]
    listed = client.get("/v1/collections", headers=writer).json()["collections"]
    assert [(c["name"], c["default"]) for c in listed] == [("tea", False)]
    # Another key of other collections neither sees nor reads it.
    stranger = _auth(data_dir, ["ask", "ingest"], ["elsewhere"])
    assert client.get("/v1/collections", headers=stranger).json() == {"collections": []}
    refused = client.post(
        "/v1/search", json={"query": "tea", "collection": "tea"}, headers=stranger
    )
    assert _error(refused, 404)["message"] == "unknown collection 'tea'"


def test_files_are_uploaded_as_multipart_and_replace_themselves(
    client: TestClient, writer: dict[str, str]
) -> None:
    files = [
        ("file", ("a.md", b"# A\n\nAlpha text about kettles and water.\n", "text/markdown")),
        ("file", ("b.txt", b"Bravo text about teapots.\n", "text/plain")),
    ]
    first = client.post("/v1/collections/more/documents", files=files, headers=writer)
    assert first.status_code == 201, first.text
    assert first.json()["sources"] == ["a.md", "b.txt"] and first.json()["files"] == 2
    chunks = _collections(client)["more"]
    again = client.post("/v1/collections/more/documents", files=files[:1], headers=writer)
    assert again.status_code == 201
    assert _collections(client)["more"] == chunks  # a.md replaced, not added twice


def test_a_document_that_cannot_be_read_is_422_and_the_others_are_kept(
    client: TestClient, writer: dict[str, str]
) -> None:
    files = [
        ("file", ("good.txt", b"Good text about cups.\n", "text/plain")),
        ("file", ("latin1.txt", "caf\xe9 au lait".encode("latin-1"), "text/plain")),
    ]
    mixed = client.post("/v1/collections/more/documents", files=files, headers=writer)
    assert mixed.status_code == 201
    assert mixed.json()["sources"] == ["good.txt"]
    [failure] = mixed.json()["failures"]
    assert failure["source"] == "latin1.txt" and "not valid UTF-8" in failure["reason"]
    alone = client.post("/v1/collections/more/documents", files=files[1:], headers=writer)
    error = _error(alone, 422)
    assert error["field"] == "documents" and "latin1.txt: not valid UTF-8" in error["message"]
    empty = client.post(
        "/v1/collections/more/documents", json={"source": "e.md", "text": "  "}, headers=writer
    )
    assert "e.md" in _error(empty, 422)["message"]


def test_a_name_is_reduced_to_its_file_name(client: TestClient, writer: dict[str, str]) -> None:
    response = client.post(
        "/v1/collections/more/documents",
        json={"source": "../../etc/escape.md", "text": "Text that stays in its place."},
        headers=writer,
    )
    assert response.status_code == 201 and response.json()["sources"] == ["escape.md"]


@pytest.mark.parametrize(
    ("scopes", "collections", "status"),
    [(["ask"], ["tea"], 403), (["ingest", "admin"], ["tea"], 404), (["ingest"], None, 201)],
)
def test_uploads_need_the_ingest_scope_and_a_collection_of_the_key(
    client: TestClient,
    data_dir: Path,
    scopes: list[str],
    collections: list[str] | None,
    status: int,
) -> None:
    auth = _auth(data_dir, scopes, collections)
    response = client.post(
        "/v1/collections/granted/documents", json={"source": "g.md", "text": NOTES}, headers=auth
    )
    assert response.status_code == status, response.text
    if status == 404:  # the same answer as for a collection that exists and is another's
        assert response.json()["error"]["message"] == "unknown collection 'granted'"
        other = client.post(
            "/v1/collections/more/documents", json={"source": "g.md", "text": NOTES}, headers=auth
        )
        assert other.json()["error"]["message"] == "unknown collection 'more'"


def test_uploads_need_a_key(client: TestClient) -> None:
    response = client.post("/v1/collections/tea/documents", json={"source": "a.md", "text": "x"})
    assert _error(response, 401)["type"] == "unauthorized"


@pytest.mark.parametrize(
    ("request_args", "status", "fragment"),
    [
        ({"json": {"source": "big.md", "text": "x" * LIMIT}}, 413, f"limit of {LIMIT} bytes"),
        ({"files": [("file", ("big.md", b"x" * LIMIT))]}, 413, f"limit of {LIMIT} bytes"),
        ({"json": {"source": "tool.exe", "text": "MZ"}}, 415, "'.exe' are not ingested"),
        ({"files": [("file", ("noext", b"text"))]}, 415, "'(no suffix)'"),
        ({"content": b"plain text", "headers": {"Content-Type": "text/plain"}}, 415, "multipart"),
        ({"json": {"source": "a.md"}}, 422, "text"),
        ({"json": {"source": "a.md", "text": 5}}, 422, "text"),
        ({"content": b"{", "headers": {"Content-Type": "application/json"}}, 422, "not valid JSON"),
        ({"json": {"source": ".hidden.md", "text": "x"}}, 422, "not a file name"),
        ({"data": {"field": "only a field"}, "files": []}, 422, "holds no file"),
        (
            {"content": b"--x\r\nbroken", "headers": {"Content-Type": "multipart/form-data"}},
            422,
            "not valid multipart/form-data",
        ),
        (
            {"files": [("file", ("d.md", b"one")), ("other", ("d.md", b"two"))]},
            422,
            "sent more than once",
        ),
    ],
)
def test_bad_uploads_are_refused_clearly_and_ingest_nothing(
    client: TestClient,
    writer: dict[str, str],
    request_args: dict[str, Any],
    status: int,
    fragment: str,
) -> None:
    before = _collections(client)
    headers = {**writer, **request_args.pop("headers", {})}
    if "data" in request_args and not request_args.get("files"):
        request_args["files"] = [("placeholder", (None, "x"))]  # multipart, no file part
    response = client.post("/v1/collections/tea/documents", headers=headers, **request_args)
    assert fragment in _error(response, status)["message"]
    assert _collections(client) == before


def test_the_supported_types_are_named(client: TestClient, writer: dict[str, str]) -> None:
    response = client.post(
        "/v1/collections/tea/documents", json={"source": "x.bin", "text": "?"}, headers=writer
    )
    message = _error(response, 415)["message"]
    assert all(suffix in message for suffix in SUPPORTED_SUFFIXES)


@pytest.mark.parametrize("name", ["bad name", "-dash", "a" * 65, "x%2Fy", "..."])
def test_a_collection_name_must_be_a_plain_word(
    client: TestClient, data_dir: Path, name: str
) -> None:
    operator = _auth(data_dir, ["ingest"], None)
    response = client.post(
        f"/v1/collections/{name}/documents", json={"source": "a.md", "text": "x"}, headers=operator
    )
    if response.status_code == 404:  # a name with a slash never reaches the route
        assert "/" in name.replace("%2F", "/")
        return
    error = _error(response, 422)
    assert error["field"] == "collection" and "letters, digits" in error["message"]


async def test_an_upload_is_ingested_off_the_event_loop(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An embedder as slow as a model (100 ms a call): embedding on the loop would be named by
    asyncio's debug mode (as ``test_event_loop`` does for the question routes). A garbage
    collection or a thread holding the GIL may slow one round: fail on what most show."""
    loop = asyncio.get_running_loop()
    app = build_app(tmp_path, backend=ScriptedBackend(), embedder=HashEmbedder(delay_s=0.1))
    auth = {"Authorization": f"Bearer {create_key(tmp_path, 'loop', scopes=['ingest'])}"}
    rounds: list[list[str]] = []
    async with asgi_client(app) as client:

        async def upload(name: str) -> None:  # its own text: a copy would not be embedded
            body = {"source": f"{name}.md", "text": f"{NOTES}\nNoted in {name}.\n"}
            response = await client.post("/v1/collections/c/documents", json=body, headers=auth)
            assert response.status_code == 201

        await upload("warm")
        loop.set_debug(True)
        loop.slow_callback_duration = 0.05
        try:
            with caplog.at_level(logging.WARNING, logger="asyncio"):
                for n in range(3):
                    await asyncio.sleep(0)
                    caplog.clear()
                    await upload(f"round{n}")
                    await asyncio.sleep(0)
                    messages = [r.getMessage() for r in caplog.records if r.name == "asyncio"]
                    rounds.append([m for m in messages if "took" in m])
        finally:
            loop.set_debug(False)
    assert len([r for r in rounds if r]) <= 1, rounds


def test_an_upload_the_server_cannot_store_is_507_and_ingests_nothing(
    client: TestClient, writer: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(self: SnapshotWriter) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    before = _collections(client)
    monkeypatch.setattr(SnapshotWriter, "publish", full_disk)
    response = client.post(
        "/v1/collections/tea/documents", json={"source": "full.md", "text": NOTES}, headers=writer
    )
    error = _error(response, 507)
    assert error["message"] == (
        "the upload could not be stored (No space left on device); nothing was ingested"
    )
    assert _collections(client) == before


def test_a_file_name_with_a_control_character_is_a_422_naming_the_field(
    client: TestClient, writer: dict[str, str]
) -> None:
    before = _collections(client)
    raw = (
        b'--B\r\nContent-Disposition: form-data; name="f"; filename="nul\x00byte.md"\r\n\r\n'
        + NOTES.encode()
        + b"\r\n--B--\r\n"
    )
    responses = [
        client.post(
            "/v1/collections/tea/documents",
            content=raw,
            headers={**writer, "Content-Type": "multipart/form-data; boundary=B"},
        )
    ]
    for name in ("nul\x00byte.md", "line\nbreak.md", "bidi\u202eevil.md"):
        responses.append(
            client.post(
                "/v1/collections/tea/documents",
                json={"source": name, "text": NOTES},
                headers=writer,
            )
        )
    for response in responses:
        error = _error(response, 422)
        assert error["field"] == "source" and "control characters" in error["message"]
    assert _collections(client) == before


def test_a_long_file_name_is_shortened_with_a_hash_and_stays_the_same_source(
    client: TestClient, writer: dict[str, str]
) -> None:
    name = "é" * 200 + ".md"  # 403 bytes in UTF-8: over any file system's 255
    bodies = [{"source": name, "text": NOTES}, {"source": name, "text": NOTES + "More.\n"}]
    sources = []
    for body in bodies:
        response = client.post("/v1/collections/more/documents", json=body, headers=writer)
        assert response.status_code == 201, response.text
        (source,) = response.json()["sources"]
        sources.append(source)
    assert sources[0] == sources[1]  # the second upload replaced the first
    assert sources[0].endswith(".md") and len(sources[0].encode()) <= 200
    assert sources[0].startswith("é" * 50)


HOSTILE_NAMES = [
    "",
    ".",
    "..",
    "../../etc/passwd.md",
    "\\..\\win.md",
    ".md",
    " .md",
    "a" * 251 + ".md",
    "a" * 4000 + ".md",
    "😀" * 70 + ".txt",
    "x.MD",
    "x.md\x00.pdf",
    "tab\tname.md",
    "del\x7f.md",
    "zero\u200bwidth.md",
    "no-suffix",
    "x." + "m" * 300,
    "%00.md",
    "name with spaces.md",
]


@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=range(len(HOSTILE_NAMES)))
def test_no_upload_name_is_a_server_error(
    client: TestClient, writer: dict[str, str], name: str
) -> None:
    """Each name, as a multipart file and as JSON: a 201 or a 4xx naming what was wrong."""
    multipart = client.post(
        "/v1/collections/more/documents",
        files=[("file", (name, b"Some words here.", "text/plain"))],
        headers=writer,
    )
    as_json = client.post(
        "/v1/collections/more/documents",
        json={"source": name, "text": "Some words here."},
        headers=writer,
    )
    for response in (multipart, as_json):
        assert response.status_code < 500, (name, response.status_code, response.text)
        if response.status_code >= 400:
            assert response.json()["error"]["message"]


MULTIPART_SHAPES = [
    b"",
    b"--B\r\n",
    b'--B\r\nContent-Disposition: form-data; name="f"; filename="a.md"\r\n\r\nhi',
    b'--B\r\nContent-Disposition: form-data; name="f"\r\n\r\nno file\r\n--B--\r\n',
    b'--B\r\nContent-Disposition: form-data; filename="a.md"\r\n\r\nx\r\n--B--\r\n',
    b'--B\r\nContent-Disposition: form-data; name="f"; filename=""\r\n\r\nx\r\n--B--\r\n',
    b'--B\r\nContent-Disposition: form-data; name="f"; filename="a\x00.md"\r\n\r\nx\r\n--B--\r\n',
    b"--B\r\nContent-Disposition: form-data; name=\"f\"; filename*=UTF-8''%C3%A9.md"
    b"\r\n\r\nx\r\n--B--\r\n",
    b"--B\r\nNo-Disposition: x\r\n\r\nx\r\n--B--\r\n",
    b"\xff\xfe garbage \x00\x01",
]


@pytest.mark.parametrize("body", MULTIPART_SHAPES, ids=range(len(MULTIPART_SHAPES)))
@pytest.mark.parametrize("content_type", ["multipart/form-data; boundary=B", "multipart/form-data"])
def test_no_multipart_shape_is_a_server_error(
    client: TestClient, writer: dict[str, str], body: bytes, content_type: str
) -> None:
    response = client.post(
        "/v1/collections/more/documents",
        content=body,
        headers={**writer, "Content-Type": content_type},
    )
    assert response.status_code < 500, (body, response.status_code, response.text)


@pytest.mark.parametrize(
    ("name", "data", "said"),
    [
        ("notes.md", b"%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\n", "a PDF document"),
        ("report.pdf", b"# Not a PDF\n\nJust words.\n", "not such a file"),
        ("sheet.txt", b"PK\x03\x04" + b"\x00" * 40, "a zip archive"),
        ("tool.txt", b"\x7fELF\x02\x01\x01" + b"\x00" * 40, "an executable"),
        ("photo.md", b"\x89PNG\r\n\x1a\n" + b"\x00" * 40, "a PNG image"),
        ("data.csv", b"a,b\n1,\x002\n", "binary (NUL bytes)"),
    ],
)
def test_bytes_that_disagree_with_the_name_are_refused_saying_what_they_are(
    client: TestClient, writer: dict[str, str], name: str, data: bytes, said: str
) -> None:
    """Content sniffing (issue 24 §2): a PDF named .md was indexed as raw PDF syntax."""
    before = _collections(client)
    files = [("file", (name, data, "application/octet-stream"))]
    response = client.post("/v1/collections/tea/documents", files=files, headers=writer)
    message = _error(response, 415)["message"]
    assert said in message and name in message
    assert _collections(client) == before


def test_text_that_happens_to_start_like_a_format_is_still_text(
    client: TestClient, writer: dict[str, str]
) -> None:
    body = {"source": "cars.md", "text": "BMW and GIF87 are names here, not magic numbers.\n"}
    response = client.post("/v1/collections/more/documents", json=body, headers=writer)
    assert response.status_code == 201, response.text
