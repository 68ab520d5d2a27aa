"""What a question never asked before costs in CPU before anything of ragtime's own runs, and
what that asks of the machine at the ceiling issue 44 §3 wants
(``python -m bench.studies.fresh_question_cost``).

A fresh question must be screened (the moderation classifier) and embedded (the configured
embedder), and its answer embedded for attribution when the model cites nothing; no cache helps.
Each is timed here alone, in this process, on one thread, as CPU time (``time.process_time``):
the median of ``--repeats`` calls, each on a new text. Given a ``ragtime bench ceiling`` JSON
(``--ceiling``), it also prints the floor's CPU per response at its ceiling, and how many cores
a server that did only the floor's work and these would keep busy at three quarters of the
floor's ceiling (the goal): the least any design that screens and embeds each fresh question
needs, before its search, prompt, spans and report.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from app.pipeline.services import default_embedder
from app.safety.moderation import Moderator
from app.settings import get_settings

QUESTION = "How do I read a file line by line in Python, case {i}?"
ANSWER = (
    "Open the file with open() and iterate over the file object, case {i}. Each step of the "
    "loop yields one line. The with statement closes the file when the block ends."
)


def cpu_ms(work: Callable[[int], object], repeats: int) -> float:
    """The median CPU milliseconds of ``work(i)`` over ``repeats`` calls (after five)."""
    for i in range(5):
        work(-1 - i)
    samples = []
    for i in range(repeats):
        started = time.process_time()
        work(i)
        samples.append((time.process_time() - started) * 1000.0)
    return statistics.median(samples)


def floor_at_ceiling(path: Path) -> tuple[float, float]:
    """The floor's median ceiling (req/s) and its server CPU per response there (ms), over the
    runs of a ``ragtime bench ceiling`` JSON."""
    rates, cpu = [], []
    for run in json.loads(path.read_text())["runs"]:
        floor = run["floor"]
        rate = floor["ceiling"]["ceiling_rps"]
        rates.append(rate)
        cpu += [p["server_cpu_ms"] for p in floor["phases"] if p["rate"] == rate]
    return statistics.median(rates), statistics.median(cpu)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200, help="calls timed per figure")
    parser.add_argument("--ceiling", type=Path, help="a `ragtime bench ceiling` JSON")
    args = parser.parse_args(argv)
    settings = get_settings()
    moderator = Moderator()
    moderator.load()
    embedder = default_embedder(settings)
    embedder.load()
    screen = cpu_ms(lambda i: moderator.scores([QUESTION.format(i=i)]), args.repeats)
    embed = cpu_ms(lambda i: embedder.embed([QUESTION.format(i=i)]), args.repeats)
    sentences = ANSWER.split(". ")
    attribute = cpu_ms(lambda i: embedder.embed([s.format(i=i) for s in sentences]), args.repeats)
    print(f"embedder: {embedder.model_name} on {settings.embedding_backend}")
    print(f"moderation of a fresh question: {screen:.2f} ms CPU (median of {args.repeats})")
    print(f"embedding of a fresh question:  {embed:.2f} ms CPU")
    print(f"embedding of a 3-sentence answer (attribution): {attribute:.2f} ms CPU")
    if args.ceiling is not None:
        rate, floor = floor_at_ceiling(args.ceiling)
        goal = 0.75 * rate
        least = floor + screen + embed
        print(f"the floor: ceiling {rate:.0f} req/s, server CPU {floor:.2f} ms a response there")
        print(
            f"at {goal:.0f} req/s (0.75 of it), the floor's work, the screen and the embedding "
            f"alone ({least:.2f} ms a response) keep {goal * least / 1000:.2f} cores busy; with "
            f"attribution's embedding, {goal * (least + attribute) / 1000:.2f} "
            f"(this machine: {os.cpu_count()}, shared with the load generator)"
        )


if __name__ == "__main__":
    main()
