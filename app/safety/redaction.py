"""Personal data and secrets, found and redacted: one module for answers and search hits.

``redact(text, counts)`` replaces each finding with ``[<kind> redacted]`` and counts it by kind
in ``counts``. The kinds, in the order they are looked for (a secret's digits must not be taken
for a phone number, nor an IBAN's for a card):

- ``private_key``: a PEM private key block (``-----BEGIN ... PRIVATE KEY-----`` to its end, or
  to the end of the text when the end is missing);
- ``secret``: API keys and tokens by their issuers' prefixes (OpenAI ``sk-``, Stripe
  ``sk_live_``, GitHub ``ghp_``/``github_pat_``, AWS ``AKIA``/``ASIA``, Slack ``xox[abprs]-``,
  Google ``AIza``, ragtime's own ``rt_``), JWTs, ``Bearer`` tokens, and a long random-looking
  value assigned to ``api_key``, ``token``, ``secret`` or ``password``;
- ``iban``: a country code, two check digits and up to 30 letters or digits that pass ISO 13616's
  mod-97 check;
- ``email``;
- ``card``: 13 to 19 digits (spaces or dashes between) with a card network's prefix and length
  that pass the Luhn check;
- ``ssn``: a US social security number, ``AAA-GG-SSSS`` (or with spaces), never with area 000,
  666 or 900-999, group 00 or serial 0000; nine bare digits only right after "SSN";
- ``phone``: ten digits or more in groups, eight with a ``+`` country code or an area code in
  brackets.

Checksums (Luhn, mod-97) and the SSN's invalid ranges keep look-alikes (order numbers, version
strings, hashes) as they are. ``bench safety`` measures precision and recall on a labelled set.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

_PRIVATE_KEY = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
    r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|.*\Z)",
    re.DOTALL,
)
PRIVATE_KEY_BEGIN = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
PRIVATE_KEY_END = re.compile(r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")

_SECRET = re.compile(
    r"(?<![A-Za-z0-9_-])(?:"
    r"sk-(?:proj-|ant-|live-)?[A-Za-z0-9_-]{20,}"  # OpenAI, Anthropic
    r"|[rsp]k_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe
    r"|gh[pousr]_[A-Za-z0-9]{30,}"  # GitHub tokens
    r"|github_pat_[A-Za-z0-9_]{22,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"  # AWS access key ids
    r"|xox[abprs]-[A-Za-z0-9-]{10,}"  # Slack
    r"|AIza[0-9A-Za-z_-]{35}"  # Google API keys
    r"|glpat-[A-Za-z0-9_-]{20,}"  # GitLab
    r"|rt_[A-Za-z0-9_-]{40,}"  # ragtime's own API keys (rt_ + 43 characters)
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"  # JWT
    r")(?![A-Za-z0-9_-])"
    # A bearer token, and a long random-looking value assigned to a secret-sounding name.
    r"|(?i:\bbearer)\s+[A-Za-z0-9._~+/-]{16,}=*"
    r"|(?i:\b(?:api[_-]?key|access[_-]?key|secret(?:[_-]?key)?|auth[_-]?token|token|password"
    r"|passwd|pwd)\b[\"']?\s*[:=]\s*)[\"']?"
    r"(?=[A-Za-z0-9_\-+/=.!@#$%^&*]{12,})(?=[^\s\"']*\d)(?=[^\s\"']*[A-Za-z])"
    r"[A-Za-z0-9_\-+/=.!@#$%^&*]{12,}[\"']?"
)
_SECRET_NAME = re.compile(
    r"(?i:\b(?:api[_-]?key|access[_-]?key|secret(?:[_-]?key)?|auth[_-]?token|token|password"
    r"|passwd|pwd)\b[\"']?\s*[:=]\s*)"
)
_IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]){11,30}(?![A-Za-z0-9])")
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
# Not the fraction of a decimal number ("0.1000000000000000055").
_CARD = re.compile(r"(?<!\d)(?<!\d[.,])(?:\d[ -]?){12,18}\d(?!\d)")
_SSN = re.compile(
    r"(?<![\d-])(?!000|666|9\d\d)\d{3}([- ])(?!00)\d{2}\1(?!0000)\d{4}(?![\d-])"
    r"|(?i:\bSSN\b[:#]?\s*)(?!000|666|9\d\d)\d{3}(?!00)\d{2}(?!0000)\d{4}(?!\d)"
)
_SSN_LABEL = re.compile(r"(?i:\bSSN\b[:#]?\s*)")
# Not inside a longer run of digit groups (a card or an id that failed its own checks).
_PHONE = re.compile(
    r"(?<![\w+])(?<!\d[ .:,-])(?:\+\d{1,3}[ .-]?)?(?:\(\d{2,4}\)[ .-]?|\d{2,4}[ .-])"
    r"\d{3,4}[ .-]?\d{3,4}(?!\d)(?![ .-]\d)"
)

#: Every kind, in the order they are redacted.
KINDS = ("private_key", "secret", "iban", "email", "card", "ssn", "phone")


def luhn_ok(digits: str) -> bool:
    """The Luhn check of a card number's digits."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


#: IBAN lengths by country (ISO 13616 registry); a code not listed is checked by mod-97 alone.
IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AT": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29, "CH": 21, "CY": 28,
    "CZ": 24, "DE": 22, "DK": 18, "EE": 20, "ES": 24, "FI": 18, "FR": 27, "GB": 22, "GR": 27,
    "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IS": 26, "IT": 27, "LI": 21, "LT": 20, "LU": 20,
    "LV": 21, "MC": 27, "MT": 31, "NL": 18, "NO": 15, "PL": 28, "PT": 25, "RO": 24, "SA": 24,
    "SE": 24, "SI": 19, "SK": 24, "SM": 27, "TR": 26,
}  # fmt: skip


def iban_ok(candidate: str) -> bool:
    """ISO 13616: the country's length (when known) and the mod-97 check equal to 1."""
    iban = candidate.replace(" ", "").upper()
    if not 15 <= len(iban) <= 34 or not iban[:2].isalpha() or not iban[2:4].isdigit():
        return False
    expected = IBAN_LENGTHS.get(iban[:2])
    if expected is not None and len(iban) != expected:
        return False
    digits = "".join(str(int(ch, 36)) for ch in iban[4:] + iban[:4])
    return int(digits) % 97 == 1


def _replace(kind: str, counts: Counter[str]) -> Callable[[re.Match[str]], str]:
    def replace(match: re.Match[str]) -> str:
        counts[kind] += 1
        return f"[{kind} redacted]"

    return replace


def _secret(counts: Counter[str]) -> Callable[[re.Match[str]], str]:
    def replace(match: re.Match[str]) -> str:
        counts["secret"] += 1
        named = _SECRET_NAME.match(match.group())
        if named is not None:  # keep the name: "password: [secret redacted]"
            return named.group() + "[secret redacted]"
        if match.group()[:6].lower() == "bearer":
            return match.group()[:6] + " [secret redacted]"
        return "[secret redacted]"

    return replace


def _checked(
    kind: str, counts: Counter[str], check: Callable[[str], bool]
) -> Callable[[re.Match[str]], str]:
    def replace(match: re.Match[str]) -> str:
        if not check(match.group()):
            return match.group()
        counts[kind] += 1
        return f"[{kind} redacted]"

    return replace


#: Card numbers by issuer: (first digits, lengths). A number no network issues is not a card.
_CARD_RANGES: tuple[tuple[tuple[int, int], tuple[int, ...]], ...] = (
    ((4, 4), (13, 16, 19)),  # Visa
    ((51, 55), (16,)),  # Mastercard
    ((2221, 2720), (16,)),  # Mastercard 2-series
    ((34, 34), (15,)),  # American Express
    ((37, 37), (15,)),
    ((6011, 6011), (16, 17, 18, 19)),  # Discover
    ((644, 649), (16, 17, 18, 19)),
    ((65, 65), (16, 17, 18, 19)),
    ((3528, 3589), (16, 17, 18, 19)),  # JCB
    ((300, 305), (14, 15, 16, 17, 18, 19)),  # Diners Club
    ((36, 36), (14, 15, 16, 17, 18, 19)),
    ((38, 39), (16, 17, 18, 19)),
    ((62, 62), (16, 17, 18, 19)),  # UnionPay
)


def card_ok(text: str) -> bool:
    """A number some card network issues (its prefix and length) that passes the Luhn check."""
    digits = re.sub(r"\D", "", text)
    issued = any(
        low <= int(digits[: len(str(low))]) <= high and len(digits) in lengths
        for (low, high), lengths in _CARD_RANGES
    )
    return issued and luhn_ok(digits)


def phone_ok(text: str) -> bool:
    """Ten digits or more; fewer (eight) only with a country code or an area code in brackets."""
    digits = sum(ch.isdigit() for ch in text)
    return digits >= 10 or (digits >= 8 and text.lstrip()[:1] in "+(")


def _ssn(counts: Counter[str]) -> Callable[[re.Match[str]], str]:
    def replace(match: re.Match[str]) -> str:
        counts["ssn"] += 1
        label = _SSN_LABEL.match(match.group())
        return (label.group() if label is not None else "") + "[ssn redacted]"

    return replace


def redact(text: str, counts: Counter[str] | None = None) -> str:
    """``text`` with every finding replaced by ``[<kind> redacted]``, counted in ``counts``."""
    if not text:
        return text
    counts = counts if counts is not None else Counter()
    if "PRIVATE KEY" in text:
        text = _PRIVATE_KEY.sub(_replace("private_key", counts), text)
    text = _SECRET.sub(_secret(counts), text)
    text = _IBAN.sub(_checked("iban", counts, iban_ok), text)
    if "@" in text:
        text = _EMAIL.sub(_replace("email", counts), text)
    text = _CARD.sub(_checked("card", counts, card_ok), text)
    text = _SSN.sub(_ssn(counts), text)
    return _PHONE.sub(_checked("phone", counts, phone_ok), text)


def redaction_attributes(counts: Counter[str] | dict[str, int], prefix: str) -> dict[str, int]:
    """Span attributes: ``<prefix>.redactions`` (the total) and ``<prefix>.redacted.<kind>``."""
    attributes = {f"{prefix}.redactions": sum(counts.values())}
    for kind, count in counts.items():
        attributes[f"{prefix}.redacted.{kind}"] = count
    return attributes
