"""The extractive answer's text: the one stretch of one passage that best answers the question,
in the passage's words, with its ``[n]``.

Measured on the labelled sets (``ragtime eval answers``; docs/studies/answers.md, "Answers a user
can trust"), an answer is rarely one sentence: the sentence closest to the question is followed (or
preceded) by the ones that carry its facts ("The project name is pronounced Deb'-ee-en ... This word
is a contraction of the names of Debra and Ian Murdock"). So the excerpt is a *window*: a run of
consecutive pieces of one passage, at most ``EXCERPT_CHARS`` long, that neither crosses a heading
nor holds a sentence the injection screen flags. Each piece is ranked (``_ranked``) by

* its sentence's similarity to the question;
* ``WORDS_WEIGHT`` times the share of the question's content words it holds, which a sentence
  embedding weighs too little ("catch an exception": the sentence that says ``except``);
* ``HEAD_WEIGHT`` times how far the heading it stands under (a piece that is itself a question:
  an FAQ's) is closer to the question than ``HEAD_MIN``, halved after its first ``HEAD_LEAD``
  pieces: an answer follows its question. A passage's opening stands under its section's
  heading when another passage holds that heading's text (chunks overlap).

A window is worth its best piece's rank plus ``SUPPORT_WEIGHT`` times what its other pieces rank
above ``SUPPORT_FLOOR``: a run that goes on answering beats a lone sentence amid others. The
best window wins (the earlier on a tie), and brings the piece before it when it starts
mid-sentence (after an abbreviation's full stop) and the one after when it ends on a colon (the
example it introduces).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.safety.injection import screen
from app.stages.grounding import terms
from inference.prompt import PromptPassage
from retrieval.store.sentences import ScoredPiece

#: The longest excerpt, in characters (a single piece longer than this may stand alone).
EXCERPT_CHARS = 600
#: How much the question's own words in a piece weigh beside its similarity.
WORDS_WEIGHT = 0.15
#: A heading that asks the question lifts the pieces under it (see the module docstring).
HEAD_WEIGHT = 1.0
HEAD_MIN = 0.5
HEAD_LEAD = 2
#: What a window's other pieces add to its best one's rank, above this floor.
SUPPORT_WEIGHT = 0.3
SUPPORT_FLOOR = 0.3
#: The longest piece a window brings along to be read (the sentence start, the example).
FOLLOWER_CHARS = 400


@dataclass(frozen=True)
class Piece:
    """A piece of a passage the excerpt holds: which passage, where in it, and its text."""

    label: int
    position: int
    text: str


def excerpt(
    question: str,
    passages: Sequence[PromptPassage],
    pieces: dict[int, list[ScoredPiece]],
) -> list[Piece]:
    """The best window's pieces in order (empty when no piece was scored)."""
    ranked = _ranked(question, passages, pieces)
    barred: set[tuple[int, int]] = set()
    while True:
        window = _best_window(ranked, pieces, barred)
        if not window:
            return []
        chosen = _readable(window, pieces, barred)
        flagged = [p for p in chosen if screen(p.text).reasons]
        if not flagged:
            return chosen
        barred.update((p.label, p.position) for p in flagged)


def labelled(chosen: list[Piece]) -> str:
    """The pieces in order, each passage's run of them followed by its label."""
    parts: list[str] = []
    for i, piece in enumerate(chosen):
        parts.append(piece.text.strip("\n").rstrip())
        following = chosen[i + 1] if i + 1 < len(chosen) else None
        if following is None or following.label != piece.label:
            parts[-1] = f"{parts[-1]} [{piece.label}]"
    return _joined(parts)


def _ranked(
    question: str, passages: Sequence[PromptPassage], pieces: dict[int, list[ScoredPiece]]
) -> dict[int, list[float | None]]:
    """Each piece's rank, in its passage's order; None for a piece that was not scored."""
    asked = terms(question)
    lifts = _headings(passages, pieces)
    out: dict[int, list[float | None]] = {}
    for label, found in pieces.items():
        ranks: list[float | None] = []
        for piece, lift in zip(found, lifts[label], strict=True):
            if piece.score is None:
                ranks.append(None)
                continue
            words = len(asked & terms(piece.text)) / len(asked) if asked else 0.0
            ranks.append(piece.score + WORDS_WEIGHT * words + lift)
        out[label] = ranks
    return out


def _headings(
    passages: Sequence[PromptPassage], pieces: dict[int, list[ScoredPiece]]
) -> dict[int, list[float]]:
    """What each piece gains from the heading it stands under (see the module docstring)."""
    asks = {
        " ".join(piece.text.split()): piece.asks
        for found in pieces.values()
        for piece in found
        if piece.asks is not None
    }
    out: dict[int, list[float]] = {}
    for passage in passages:
        opening = passage.passage.section.split(" | ")[0].rsplit(" > ", 1)[-1]
        heading, after = asks.get(" ".join(opening.split())), 0
        lifts = []
        for piece in pieces[passage.label]:
            if piece.asks is not None:
                heading, after = piece.asks, 0
            lift = 0.0
            if heading is not None and piece.score is not None:
                lift = HEAD_WEIGHT * max(0.0, heading - HEAD_MIN)
                lift *= 1.0 if after < HEAD_LEAD else 0.5
                after += 1
            lifts.append(lift)
        out[passage.label] = lifts
    return out


def _best_window(
    ranked: dict[int, list[float | None]],
    pieces: dict[int, list[ScoredPiece]],
    barred: set[tuple[int, int]],
) -> list[Piece]:
    best: tuple[float, int, int, int, int] | None = None  # value, label, start, end, size
    for label, found in pieces.items():
        ranks = ranked[label]
        for start in range(len(found)):
            size = 0
            for end in range(start, len(found)):
                if _stops(found[end], (label, end), barred):
                    break
                size += len(found[end].text)
                if end > start and size > EXCERPT_CHARS:
                    break
                scored = sorted((r for r in ranks[start : end + 1] if r is not None), reverse=True)
                if not scored:
                    continue
                value = scored[0] + SUPPORT_WEIGHT * sum(
                    max(0.0, r - SUPPORT_FLOOR) for r in scored[1:]
                )
                if best is None or (value, -size) > (best[0], -best[4]):
                    best = (value, label, start, end, size)
    if best is None:
        return []
    _, label, start, end, _ = best
    return [Piece(label, i, pieces[label][i].text) for i in range(start, end + 1)]


def _stops(piece: ScoredPiece, where: tuple[int, int], barred: set[tuple[int, int]]) -> bool:
    """Whether a window must end before this piece: a heading, or a flagged sentence."""
    return piece.asks is not None or where in barred or not piece.text.strip()


def _readable(
    window: list[Piece], pieces: dict[int, list[ScoredPiece]], barred: set[tuple[int, int]]
) -> list[Piece]:
    """The window with the piece before it when it starts mid-sentence (a lower-case start,
    after an abbreviation's full stop), and the pieces after it while they are wanted
    (``_unfinished``: the example a colon introduces, its lines), ``FOLLOWER_CHARS`` of them at
    most; none a heading or barred."""
    first = window[0]
    found = pieces[first.label]
    out = list(window)
    if first.text.strip()[:1].islower() and first.position > 0:
        before = found[first.position - 1]
        if _follows(before, FOLLOWER_CHARS) and (first.label, first.position - 1) not in barred:
            out.insert(0, Piece(first.label, first.position - 1, before.text))
    room, added = FOLLOWER_CHARS, 0
    while out[-1].position + 1 < len(found):
        position = out[-1].position + 1
        after = found[position]
        wanted = _unfinished(out[-1].text, first_step=added == 0)
        if not wanted or not _follows(after, room) or (first.label, position) in barred:
            break
        out.append(Piece(first.label, position, after.text))
        room, added = room - len(after.text.strip()), added + 1
    return out


def _unfinished(text: str, *, first_step: bool) -> bool:
    """Whether a piece wants the one after it: it introduces it (a colon), or, for the window's
    own last piece, it does not end a sentence ("run the command" before the command)."""
    text = text.strip()
    return text.endswith(":") or (first_step and not text.endswith((".", "!", "?", ".)", '."')))


def _follows(piece: ScoredPiece, room: int) -> bool:
    text = piece.text.strip()
    return bool(text) and len(text) <= room and piece.asks is None


def _joined(parts: list[str]) -> str:
    """Pieces as prose, their line wrapping undone; a piece of code (``_is_code``) keeps its
    lines and stands on lines of its own."""
    out = ""
    for part in parts:
        code = _is_code(part)
        text = part if code else " ".join(part.split())
        if not out:
            out = text
        elif code or out.endswith(":") or "\n" in out.rsplit("[", 1)[-1]:
            out = f"{out}\n{text}"
        else:
            out = f"{out} {text}"
    return out


def _is_code(piece: str) -> bool:
    """Whether most of a piece's lines after its first are indented or prompts (``>>>``,
    ``...``, ``$``), or its one line is: an example, whose lines mean something."""
    lines = [line for line in piece.splitlines()[1:] if line.strip()]
    if not lines:
        return piece.startswith(("    ", "\t")) or piece.lstrip().startswith((">>>", "$ "))
    marked = sum(line.startswith(("  ", "\t", ">>>", "...", "$ ")) for line in lines)
    return marked * 2 >= len(lines)
