"""``app.safety.redaction``: each kind found and redacted, with its checks (Luhn, mod-97, SSN
ranges)."""

from __future__ import annotations

from collections import Counter

import pytest

from app.safety.redaction import card_ok, iban_ok, redact


def redacted(text: str) -> tuple[str, dict[str, int]]:
    counts: Counter[str] = Counter()
    return redact(text, counts), dict(counts)


@pytest.mark.parametrize(
    ("text", "expected", "kind"),
    [
        ("mail jane.doe@example.com now", "mail [email redacted] now", "email"),
        ("call +1 555 123 4567.", "call [phone redacted].", "phone"),
        ("card 4111 1111 1111 1111.", "card [card redacted].", "card"),
        ("amex 3782 822463 10005 ok", "amex [card redacted] ok", "card"),
        ("iban DE89 3704 0044 0532 0130 00.", "iban [iban redacted].", "iban"),
        ("iban GB29NWBK60161331926819 ok", "iban [iban redacted] ok", "iban"),
        ("ssn 123-45-6789.", "ssn [ssn redacted].", "ssn"),
        ("SSN: 219099999 on file", "SSN: [ssn redacted] on file", "ssn"),
        ("key sk-proj-abcDEF1234567890ghijKLMNop ok", "key [secret redacted] ok", "secret"),
        ("ghp_16C7e42F292c6912E7710c838347Ae178B4a", "[secret redacted]", "secret"),
        ("id AKIAIOSFODNN7EXAMPLE,", "id [secret redacted],", "secret"),
        ("xoxb-123456789012-abcdefABCDEF ok", "[secret redacted] ok", "secret"),
        ("rt_" + "a1B2" * 11, "[secret redacted]", "secret"),
        ("Authorization: Bearer abcdef0123456789xyz", "Authorization: Bearer [secret redacted]",
         "secret"),
        ("password = 'Hunter2!sUperSecret99'", "password = [secret redacted]", "secret"),
        ("-----BEGIN PRIVATE KEY-----\nMIIB\nAB==\n-----END PRIVATE KEY-----\nok",
         "[private_key redacted]\nok", "private_key"),
    ],
)  # fmt: skip
def test_each_kind_is_redacted_and_counted(text: str, expected: str, kind: str) -> None:
    assert redacted(text) == (expected, {kind: 1})


@pytest.mark.parametrize(
    "text",
    [
        "order 4111 1111 1111 1112",  # fails Luhn
        "thread 130283832797456 started",  # passes Luhn, but no network issues it
        "0.1000000000000000055511151231257827",
        "iban DE89 3704 0044 0532 0130 01",  # fails mod-97
        "000-12-3456 666-12-3456 912-34-5678 123-00-4567 123-45-0000",  # invalid SSNs
        "version 3.12.1 on 2024-01-15, port 8080, pid 12345",
        "sha 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "pip install scikit-learn; the ghp_ prefix; password = getpass.getpass()",
        "Bearer tokens go in the header; 0 1 1 2 3 5 8 13 21 34 55 89 144",
        "10 100 1000",
    ],
)
def test_look_alikes_are_kept(text: str) -> None:
    assert redacted(text) == (text, {})


def test_the_checks() -> None:
    assert card_ok("4111111111111111") and not card_ok("4111111111111112")
    assert not card_ok("1302838327974561")  # Luhn passes, no network's prefix
    assert iban_ok("DE89370400440532013000") and not iban_ok("DE89370400440532013001")
    assert not iban_ok("DE8937040044053201300")  # Germany's IBANs have 22 characters


def test_a_private_key_without_its_end_is_redacted_to_the_end() -> None:
    assert redacted("key:\n-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE") == (
        "key:\n[private_key redacted]",
        {"private_key": 1},
    )
