"""The streaming answer filter (the question screen is tested as a stage, in tests/app/stages/)."""

from __future__ import annotations

import pytest

from app.safety.moderation import AnswerFilter, Moderator


@pytest.fixture(scope="module")
def moderator() -> Moderator:
    m = Moderator(threshold=0.9)
    m.load()
    return m


def stream(moderator: Moderator, deltas: list[str]) -> tuple[list[str], AnswerFilter]:
    f = moderator.answer_filter()
    released = [f.feed(d) for d in deltas]
    released.append(f.flush())
    return released, f


def test_plain_text_is_released_as_it_streams(moderator: Moderator) -> None:
    released, _ = stream(moderator, ["Lists are ", "mutable ", "sequences."])
    assert released[:2] == ["Lists are ", "mutable "]
    assert "".join(released) == "Lists are mutable sequences."


def test_an_email_split_across_deltas_is_redacted(moderator: Moderator) -> None:
    released, f = stream(moderator, ["Mail ", "bob.smith", "@exam", "ple.org", " today."])
    assert "".join(released) == "Mail [email redacted] today."
    assert not any("bob" in r for r in released)
    assert f.redactions["email"] == 1


@pytest.mark.parametrize(
    ("deltas", "expected", "kind"),
    [
        (["Call +1 555 ", "123 4567 now"], "Call [phone redacted] now", "phone"),
        (["Call (555) 123-", "4567."], "Call [phone redacted].", "phone"),
        (["Card 4111 1111 ", "1111 1111 ok"], "Card [card redacted] ok", "card"),
    ],
)
def test_numbers_split_across_deltas_are_redacted(
    moderator: Moderator, deltas: list[str], expected: str, kind: str
) -> None:
    released, f = stream(moderator, deltas)
    assert "".join(released) == expected
    assert f.redactions[kind] == 1


def test_numbers_that_are_not_cards_or_phones_pass(moderator: Moderator) -> None:
    text = "range(10) gives 0 to 9; 1234 5678 9012 3456 fails Luhn; pi is 3.14159."
    released, f = stream(moderator, [text[:20], text[20:]])
    assert "".join(released) == text
    assert not f.redactions


def test_profane_words_are_masked(moderator: Moderator) -> None:
    released, f = stream(moderator, ["This is ", "shit code."])
    assert "".join(released) == "This is s*** code."
    assert f.redactions["profanity"] == 1


@pytest.mark.parametrize(
    ("deltas", "expected", "kind"),
    [
        (["SSN 123-", "45-67", "89 ok"], "SSN [ssn redacted] ok", "ssn"),
        (["to DE89 3704 ", "0044 0532 ", "0130 00 today"], "to [iban redacted] today", "iban"),
        (["use sk-proj-abc", "DEF1234567890ghij", "KLMNop now"], "use [secret redacted] now",
         "secret"),
        (["Authorization: Bearer ", "abcdef0123", "456789xyz done"],
         "Authorization: Bearer [secret redacted] done", "secret"),
        (["password: ", "Hunter2!s", "UperSecret99 end"], "password: [secret redacted] end",
         "secret"),
    ],
)  # fmt: skip
def test_new_kinds_split_across_deltas_are_redacted(
    moderator: Moderator, deltas: list[str], expected: str, kind: str
) -> None:
    released, f = stream(moderator, deltas)
    assert "".join(released) == expected
    assert dict(f.redactions) == {kind: 1}


def test_a_streamed_private_key_never_leaves(moderator: Moderator) -> None:
    body = ["MIIEowIBAAKCAQEAvZ1x" * 3 + "\n"] * 40  # far longer than the filter holds back
    deltas = ["Here it is: -----BEGIN RSA", " PRIVATE KEY-----\n", *body, "-----END RSA PRI"]
    deltas += ["VATE KEY-----\nDone."]
    released, f = stream(moderator, deltas)
    assert "".join(released) == "Here it is: [private_key redacted]\nDone."
    assert not any("MIIE" in r for r in released)
    assert dict(f.redactions) == {"private_key": 1}


def test_a_private_key_cut_off_by_the_end_of_the_answer_is_dropped(moderator: Moderator) -> None:
    released, f = stream(moderator, ["-----BEGIN PRIVATE KEY-----\n", "MIIEow" * 50])
    assert "".join(released) == "[private_key redacted]"
    assert f.redactions["private_key"] == 1
