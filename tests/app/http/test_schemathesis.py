"""schemathesis against the running service: the OpenAPI document is the contract, and every
answer must keep it (status codes, content types, bodies and headers as documented), with no 5xx.

The app runs in uvicorn on a free port of 127.0.0.1, on doubles (the null backend, the hash
embedder over ``seeded_data_dir``), so generation costs nothing and the run is bounded by its
example counts: about 10 s on 2 cores, most of it schemathesis and hypothesis making the cases
(marked ``fuzz``: ``make test`` runs it, ``make test-fast`` does not). Cases are generated from
the document the app serves (``/openapi.json``) both as it describes valid requests (positive)
and as it forbids them (negative), sent with a valid key and with none. Checks: no 5xx at all,
and every status, content type, header and body (each streamed event too) as the document says.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.helpers.app import build_app, served

pytestmark = pytest.mark.fuzz

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
FRAMING_HEADERS = frozenset({"content-length", "transfer-encoding", "host", "connection"})
#: Examples with a key and without (where every protected route stops at 401): about 10 s in
#: all on 2 cores. Derandomized: each run sends the same cases.
WITH_KEY, WITHOUT_KEY = 300, 100
BOUNDED = settings(
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(scope="module")
def base_url(seeded_data_dir: Path) -> Iterator[str]:
    app = build_app(
        seeded_data_dir,
        generation_backend="null",
        max_in_flight=64,  # the cases come one at a time; nothing is refused for load
        # Budgets of 2 s at least: on a shared 2-core machine a 50 ms one may run out in the
        # embed stage (a 504, as it should); this run is about the contract, not the clock.
        budget_ms_min=2000,
    )
    with served(app) as url:
        yield url


@pytest.fixture(scope="module")
def api_schema(base_url: str) -> Any:
    return schemathesis.openapi.from_url(f"{base_url}/openapi.json")


def _answerable(case: Any) -> Any:
    """A valid chat case made to name a served model and end with a user's question."""
    if isinstance(case.body, dict):
        case.body["model"] = "ragtime"
        messages = case.body.get("messages")
        if isinstance(messages, list):
            messages.append({"role": "user", "content": "How do I sort a list?"})
    return case


def _run(schema: Any, base_url: str, headers: dict[str, str], examples: int) -> None:
    session = requests.Session()
    # A chat completion names a served model and asks a question, or it stops at 404 or 400:
    # a third of the cases are valid chat cases made so, to reach the pipeline and its stream.
    chat = schema["/v1/chat/completions"]["POST"].as_strategy(GenerationMode.POSITIVE)
    cases = st.one_of(
        schema.as_strategy(GenerationMode.POSITIVE),
        schema.as_strategy(GenerationMode.NEGATIVE),
        chat.map(_answerable),
    )

    @settings(BOUNDED, max_examples=examples)
    @given(case=cases)
    def check(case: Any) -> None:
        # Framing headers belong to the HTTP client, not the API: a garbled Content-Length is
        # answered by uvicorn's parser (400, plain text) before the app sees the request.
        generated = {
            k: v for k, v in (case.headers or {}).items() if k.lower() not in FRAMING_HEADERS
        }
        merged = {**generated, **headers}
        if not headers:
            merged.pop("Authorization", None)
        case.headers = merged
        case.call_and_validate(base_url=base_url, session=session, checks=CHECKS, timeout=30)

    check()


def test_schemathesis_with_a_key(api_schema: Any, base_url: str, auth: dict[str, str]) -> None:
    _run(api_schema, base_url, auth, WITH_KEY)


def test_schemathesis_without_a_key(api_schema: Any, base_url: str) -> None:
    _run(api_schema, base_url, {}, WITHOUT_KEY)
