"""Stopping an answer that has stopped answering: one that repeats itself, or writes the
next turn of the conversation.

A small model at a low temperature falls into loops (the same sentence, a list counting on)
until its token cap, and sometimes goes on to ask itself the next ``Question:``. A
``RepetitionStop`` reads the answer's text as it streams, whatever the backend, and says when
to stop:

- **repetition**: the last ``ngram`` words (whitespace-separated, each number in them read as
  ``#``, so that a heading or a list counting up repeats as much as one saying the same thing;
  a run of numbers alone, primes or ports, never counts) have already occurred
  ``occurrences - 1`` times in the answer;
- **turn**: a line of the answer, after some answer, starts with a turn marker (``Question:``,
  ``Q:``, ``User:``, markdown around it or not: the prompt's own ``Question: ...`` line,
  ``inference.prompt``, which SmolLM2 echoes with the passages before it).

What completed a stop is not released: the repeated words' last occurrence, and the line that
opens a new turn with the line break before it. So that they can be, some text is held back
while it could still turn out to be one: a new line while its first word may be a marker, and,
once some run of ``ngram`` words has occurred ``occurrences - 1`` times, the word being written
and the words at the end that begin such a run (never more than ``MAX_HELD`` characters).
Ordinary text goes as it comes. Text already released stays. Each piece costs O(its length +
``ngram``²) work: nothing rescans the answer.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from typing import Literal

StopReason = Literal["repetition", "turn"]

#: Words that open a new turn when they start a line: the prompt's own ``Question:``, and
#: the usual chat transcript markers.
TURN_MARKERS = frozenset({"question:", "q:", "user:"})
#: Markdown around a marker (``**Question:**``, ``### Question:``), ignored when matching.
_DECORATION = "*_#>"
_WORDS_AND_SPACES = re.compile(r"\s+|\S+")
_NUMBER = re.compile(r"\b\d+\b")  # a number, not the digits in a name (word0, utf8)
_LETTER = re.compile(r"[^\W\d_]")
#: The most text held back at once: a word longer than this streams on.
MAX_HELD = 256


def _may_open_turn(word: str) -> bool:
    """Whether ``word`` (the first of a line, maybe not finished) may be a turn marker."""
    bare = word.lstrip(_DECORATION).lower()
    return any(m.startswith(bare) or bare.startswith(m) for m in TURN_MARKERS)


@dataclass(frozen=True)
class Verdict:
    """What ``RepetitionStop.feed`` says of a piece: the text to release now, and why to
    stop (None: go on)."""

    text: str
    stop: StopReason | None = None


class RepetitionStop:
    """Watches one answer's text for loops and new turns; see the module docstring."""

    def __init__(self, *, ngram: int = 8, occurrences: int = 3) -> None:
        if ngram < 1 or occurrences < 2:
            raise ValueError("ngram must be >= 1 and occurrences >= 2")
        self.ngram = ngram
        self.occurrences = occurrences
        self.stopped: StopReason | None = None
        self._held = ""  # received, not yet released
        self._released = 0  # characters released so far
        self._seen = 0  # characters received so far
        self._word = ""  # the word being written (no whitespace after it yet)
        self._word_start = 0
        self._words = 0  # complete words
        self._last_end = 0  # where the last complete word ended
        self._line_start = True  # no word yet since the last newline, but decoration (**, ###)
        self._line_cut = 0  # where the answer before this line ends (0: no answer before it)
        self._tail: deque[str] = deque(maxlen=ngram)  # the last complete words
        self._starts: deque[int] = deque(maxlen=ngram)  # where each of them starts
        self._numbers = 0  # words without a letter at the end (a run of them is never counted)
        self._counts: dict[tuple[str, ...], int] = {}
        self._suspect: set[tuple[str, ...]] = set()
        """The beginnings of runs seen ``occurrences - 1`` times: words ending the answer that
        match one are held, as they may be the run's last occurrence."""

    def feed(self, piece: str) -> Verdict:
        """Take the next piece of the answer; after a stop, every piece is dropped."""
        if self.stopped is not None:
            return Verdict("")
        offset = self._seen
        self._held += piece
        self._seen += len(piece)
        for match in _WORDS_AND_SPACES.finditer(piece):
            chunk = match.group()
            if not chunk[0].isspace():
                if not self._word:
                    self._word_start = offset + match.start()
                self._word += chunk
                continue
            if self._word:
                cut = self._complete_word()
                if cut is not None:
                    return Verdict(self._release(cut, stop=True), self.stopped)
            if "\n" in chunk:
                self._line_start, self._line_cut = True, self._last_end
        return Verdict(self._release(self._hold_from()))

    def flush(self) -> str:
        """The end of the answer: what is still held, unless a stop cut it."""
        if self.stopped is not None:
            return ""
        return self._release(self._seen)

    def _complete_word(self) -> int | None:
        """Count the word just ended; where to cut the answer if it completes a stop."""
        word, start = self._word, self._word_start
        self._word = ""
        bare = word.strip(_DECORATION).lower()
        at_line_start, self._line_start = self._line_start, self._line_start and not bare
        if at_line_start and self._line_cut and bare in TURN_MARKERS:
            self.stopped = "turn"
            return self._line_cut
        self._words += 1
        self._tail.append(_NUMBER.sub("#", word))
        self._starts.append(start)
        self._last_end = start + len(word)
        self._numbers = 0 if _LETTER.search(word) else self._numbers + 1
        if len(self._tail) < self.ngram or self._numbers >= self.ngram:
            return None  # too few words yet, or numbers only (a list of them is no loop)
        run = tuple(self._tail)
        count = self._counts[run] = self._counts.get(run, 0) + 1
        if count >= self.occurrences:
            self.stopped = "repetition"
            return self._end_before(self._starts[0])  # the run's last occurrence goes
        if count == self.occurrences - 1:
            self._suspect.update(run[:j] for j in range(1, self.ngram))
        return None

    def _end_before(self, start: int) -> int:
        """Where the text before ``start`` ends, its trailing whitespace left out (only what
        is still held can be trimmed)."""
        held_from = self._released
        before = self._held[: max(start - held_from, 0)]
        return held_from + len(before.rstrip())

    def _hold_from(self) -> int:
        """Where the text that must wait starts (at most ``MAX_HELD`` characters back): a new
        line whose first word may be a turn marker, and, once a run is suspect, the word being
        written and the words at the end that begin a suspect run."""
        hold = self._seen
        if self._line_start and self._line_cut and _may_open_turn(self._word):
            hold = self._line_cut  # the line break too: cut with the line, if it is a turn
        if self._suspect:
            if self._word:
                hold = min(hold, self._word_start)
            words = list(self._tail)
            for j in range(min(len(words), self.ngram - 1), 0, -1):
                if tuple(words[-j:]) in self._suspect:
                    hold = min(hold, self._end_before(self._starts[-j]))
                    break
        return max(hold, self._seen - MAX_HELD)

    def _release(self, upto: int, *, stop: bool = False) -> str:
        """Release the held text up to ``upto`` (no further back than what is released);
        after a stop, drop the rest."""
        count = max(upto - self._released, 0)
        text, self._held = self._held[:count], self._held[count:]
        self._released += count
        if stop:
            self._held = ""
        return text


class NoStop:
    """``RepetitionStop``'s place where nothing is watched: every piece goes as it comes."""

    stopped: StopReason | None = None

    def feed(self, piece: str) -> Verdict:
        return Verdict(piece)

    def flush(self) -> str:
        return ""
