"""The repetition stop, fed answers piece by piece as a backend streams them."""

from __future__ import annotations

import pytest

from inference.repetition import MAX_HELD, NoStop, RepetitionStop, StopReason

LOOP = "The default value is evaluated once when the function is defined. "


def words(text: str) -> list[str]:
    """``text`` as a tokenizer of SmolLM2's kind streams it: a piece per word, space first."""
    return [" " + w for w in text.split()]


def run(
    pieces: list[str], watch: RepetitionStop | None = None
) -> tuple[str, StopReason | None, list[str]]:
    """What was released, why it stopped, and what each piece released."""
    watch = watch or RepetitionStop()
    released: list[str] = []
    for piece in pieces:
        verdict = watch.feed(piece)
        released.append(verdict.text)
        if verdict.stop is not None:
            return "".join(released), verdict.stop, released
    released.append(watch.flush())
    return "".join(released), None, released


def test_a_loop_stops_at_its_third_turn_which_is_not_released() -> None:
    text, stop, _ = run(words(LOOP * 6))
    assert stop == "repetition"
    assert text.strip() == (LOOP * 2).strip()


def test_a_loop_of_one_word_stops() -> None:
    text, stop, _ = run(words("Yes " + "the " * 40))
    assert stop == "repetition" and len(text.split()) < 12


def test_the_stop_can_come_mid_piece() -> None:
    text, stop, _ = run([LOOP * 4])
    assert stop == "repetition"
    assert text.strip() == (LOOP * 2).strip()


def test_what_repeats_only_twice_is_released_whole() -> None:
    answer = "Use a default of None:\n" + "    if items is None: items = []\n" * 2 + "Done."
    text, stop, _ = run(words(answer))
    assert stop is None and text.split() == answer.split()


def test_a_heading_counting_up_is_a_loop() -> None:
    """Numbers are read as ``#``: the same words around a counter are the same words."""
    turn = (
        "The answer to your question is:\n\n[{}] Creating Virtual Environments (venv.rst.txt)\n\n"
    )
    text, stop, _ = run(words("".join(turn.format(i) for i in range(1, 9))))
    assert stop == "repetition"
    assert text.split() == "".join(turn.format(i) for i in (1, 2)).split()


def test_names_with_digits_stay_apart() -> None:
    answer = " ".join(f"word{i}" for i in range(40))
    text, stop, _ = run(words(answer + " end"))
    assert stop is None and text.split() == (answer + " end").split()


def test_numbers_alone_are_no_loop() -> None:
    """Read as ``#`` they would all be the same word: a run of numbers only never counts."""
    answer = "The primes below 100: " + ", ".join(
        str(n) for n in range(2, 100) if all(n % d for d in range(2, n))
    )
    text, stop, _ = run(words(answer + ". Done."))
    assert stop is None and text.split() == (answer + ". Done.").split()


def test_ordinary_text_is_released_as_it_comes() -> None:
    """Nothing is held while nothing looks like a stop: each piece goes at once, so the first
    token reaches the client no later than without the watch."""
    pieces = words("Default values are evaluated once, at definition [1]. Use None instead.")
    _, stop, released = run(pieces)
    assert stop is None and released[:-1] == pieces and released[-1] == ""


@pytest.mark.parametrize(
    "marker", ["Question:", "Q:", "User:", "**Question:**", "question:", "### Question:"]
)
def test_a_new_turn_stops_and_its_line_is_not_released(marker: str) -> None:
    pieces = [*words("It is evaluated once [1]."), "\n\n", *words(marker + " What about")]
    text, stop, _ = run(pieces)
    assert stop == "turn"
    assert text == " It is evaluated once [1]."


def test_a_marker_split_across_pieces_is_held_until_it_is_known() -> None:
    watch = RepetitionStop()
    assert watch.feed("Use None.").text == "Use None."
    assert watch.feed("\n").text == ""  # a line break: its line may open a turn
    assert watch.feed("Qu").text == ""
    assert watch.feed("ick").text == "\nQuick"  # no marker begins so
    assert watch.feed(" fix").text == " fix"
    assert watch.flush() == ""


def test_a_marker_where_no_turn_begins_does_not_stop() -> None:
    """At the very start (the model restating the question), or inside a line."""
    answer = "Question: why is it shared? It is evaluated once. The Question: field is text."
    text, stop, _ = run(words(answer))
    assert stop is None and text.split() == answer.split()


def test_after_a_stop_everything_is_dropped() -> None:
    watch = RepetitionStop()
    run([*words("An answer."), "\n", *words("User: next")], watch)
    assert watch.stopped == "turn"
    assert watch.feed(" more").text == "" and watch.flush() == ""


def test_held_text_is_released_at_the_end() -> None:
    watch = RepetitionStop()
    assert watch.feed("An answer.\nQ").text == "An answer."
    assert watch.flush() == "\nQ"


def test_a_long_word_under_suspicion_still_streams() -> None:
    """Once some run has come twice every word being written waits, but no more than
    ``MAX_HELD`` characters of it."""
    watch = RepetitionStop(ngram=2)
    for piece in words("a b a b c"):
        watch.feed(piece)
    released = watch.feed(" " + "x" * (MAX_HELD + 50)).text
    assert released == "c " + "x" * 50


def test_a_shorter_run_or_fewer_occurrences_stop_sooner() -> None:
    answer = "one two one two one two three"
    assert run(words(answer), RepetitionStop(ngram=2, occurrences=3))[1] == "repetition"
    assert run(words("one two three one two three four"), RepetitionStop(ngram=3, occurrences=2))[
        0
    ].split() == ["one", "two", "three"]


def test_nonsense_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        RepetitionStop(ngram=0)
    with pytest.raises(ValueError):
        RepetitionStop(occurrences=1)


def test_no_stop_passes_everything() -> None:
    watch = NoStop()
    assert watch.feed(LOOP).text == LOOP and watch.feed(LOOP).stop is None
    assert watch.flush() == ""
