"""A key sent in a query string never reaches the access log."""

from __future__ import annotations

import logging

import pytest

from app.http import access_log
from app.http.access_log import RedactQuerySecrets, redact


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/v1/ask?api_key=rt_secret", "/v1/ask?api_key=[redacted]"),
        ("/v1/ask?x=1&KEY=rt_s3cret&y=2", "/v1/ask?x=1&KEY=[redacted]&y=2"),
        ("/v1/search?token=abc#frag", "/v1/search?token=[redacted]#frag"),
        ("/v1/ask?monkey=banana", "/v1/ask?monkey=banana"),  # not a credential parameter
    ],
)
def test_credential_parameters_are_masked(path: str, expected: str) -> None:
    assert redact(path) == expected


def test_uvicorn_access_records_are_redacted_before_any_handler(
    caplog: pytest.LogCaptureFixture,
) -> None:
    access_log.install()
    access_log.install()  # idempotent
    logger = logging.getLogger("uvicorn.access")
    assert sum(isinstance(f, RedactQuerySecrets) for f in logger.filters) == 1
    with caplog.at_level(logging.INFO, logger="uvicorn.access"):
        logger.info(
            '%s - "%s %s HTTP/%s" %d', "127.0.0.1:5", "POST", "/v1/ask?api_key=rt_leak", "1.1", 401
        )
    assert "rt_leak" not in caplog.text and "api_key=[redacted]" in caplog.text
