"""Prefix caching: ragtime's prompt layout against the naive one, for BENCHMARKS.md.

Both halves are ordinary ``ragtime bench load`` runs of two servers that differ only in
``RAGTIME_PROMPT_LAYOUT``, alternating round by round over grouped questions with one user; the
cached-token ratio comes from the ``done`` events' ``usage``. One pair generates with llama.cpp
(``benchmarks/prefix-shared.env``, ``benchmarks/prefix-naive.env``); the other with SGLang,
each server against a simulated SGLang server of its own, started empty (``--fake-sglang``,
``benchmarks/prefix-sim-shared.env``, ``benchmarks/prefix-sim-naive.env``): its prefix cache is a
trie of every finished request's tokens, as RadixAttention keeps, and its timings are synthetic,
so only its cached-token ratios are reported.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from bench.harness.results import BenchResult, Run
from bench.harness.stats import ratio

LAYOUT_VARIABLE = "RAGTIME_PROMPT_LAYOUT"
OURS = "shared_prefix_first"
NAIVE = "question_first"


class LayoutCache(BaseModel):
    """One layout's prompt and cached tokens, summed over its answered requests."""

    layout: str
    n: int = Field(description="Answered requests that reported usage.")
    prompt_tokens: int
    cached_tokens: int
    cached_ratio: float | None


def layout_cache(layout: str, usages: Sequence[tuple[int, int]]) -> LayoutCache:
    """``usages``: ``(prompt_tokens, cached_tokens)`` of each answered request."""
    prompt = sum(p for p, _ in usages)
    cached = sum(c for _, c in usages)
    return LayoutCache(
        layout=layout,
        n=len(usages),
        prompt_tokens=prompt,
        cached_tokens=cached,
        cached_ratio=ratio(cached, prompt) if usages else None,
    )


def run_layouts(result: BenchResult) -> list[tuple[str, Run]]:
    """Each run of ``result`` with the prompt layout of its server (ragtime's by default)."""
    layouts = {t.name: t.config.get(LAYOUT_VARIABLE, OURS) for t in result.targets}
    return [(layouts.get(run.target, OURS), run) for run in result.runs]


def _pair(result: BenchResult) -> tuple[Run | None, Run | None]:
    runs = run_layouts(result)
    ours = next((r for layout, r in runs if layout == OURS), None)
    naive = next((r for layout, r in runs if layout == NAIVE), None)
    return ours, naive


def prefix_summary(result: BenchResult | None, sim: BenchResult | None) -> str:
    """Summary bullet lines (each starting with a newline), or nothing."""
    lines: list[str] = []
    if result is not None:
        ours, naive = _pair(result)
        if ours is not None and naive is not None:
            a, b = ours.summary, naive.summary
            lines.append(
                f"- Prefix caching on the CPU default (llama.cpp), ragtime's layout against "
                f"question first: cached-token ratio {_pct(a.cached_ratio)} against "
                f"{_pct(b.cached_ratio)} (n={a.cached_ratio_n} and {b.cached_ratio_n}); TTFT p50 "
                f"{a.ttft_ms.fmt('p50', 0)} against {b.ttft_ms.fmt('p50', 0)} ms "
                f"({_x(ratio(a.ttft_ms.p50, b.ttft_ms.p50))} the naive layout's)."
            )
    if sim is not None:
        s_ours, s_naive = _pair(sim)
        if s_ours is not None and s_naive is not None:
            a, b = s_ours.summary, s_naive.summary
            lines.append(
                f"- Against the simulated SGLang server's prefix cache (synthetic timings): "
                f"cached-token ratio {_pct(a.cached_ratio)} against "
                f"{_pct(b.cached_ratio)} (n={a.cached_ratio_n} and {b.cached_ratio_n})."
            )
    return "".join("\n" + line for line in lines)


def prefix_section(result: BenchResult | None, sim: BenchResult | None, number: int) -> str:
    rows = [
        "| measured against | layout | n | prompt tokens | cached tokens | cached-token ratio "
        "| TTFT p50 ms | TTFT p95 ms |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    ratios: list[str] = []
    if result is not None:
        for layout, run in sorted(run_layouts(result), key=lambda lr: lr[0] != OURS):
            s = run.summary
            rows.append(
                f"| llama.cpp (CPU default), `{run.target}` | `{layout}` | {s.cached_ratio_n} "
                f"| {s.prompt_tokens} | {s.cached_tokens} | {_pct(s.cached_ratio)} "
                f"| {s.ttft_ms.fmt('p50', 0)} (n={s.ttft_ms.n}) | {s.ttft_ms.fmt('p95', 0)} |"
            )
        ours, naive = _pair(result)
        if ours is not None and naive is not None:
            a, b = ours.summary, naive.summary
            ratios.append(
                "llama.cpp, ragtime's layout over question first: cached-token ratio "
                f"{_x(ratio(a.cached_ratio, b.cached_ratio))}, TTFT p50 "
                f"{_x(ratio(a.ttft_ms.p50, b.ttft_ms.p50))}, TTFT p95 "
                f"{_x(ratio(a.ttft_ms.p95, b.ttft_ms.p95))}."
            )
    if sim is not None:
        for layout, run in sorted(run_layouts(sim), key=lambda lr: lr[0] != OURS):
            s = run.summary
            rows.append(
                f"| simulated SGLang (RadixAttention-like trie), `{run.target}` | `{layout}` "
                f"| {s.cached_ratio_n} | {s.prompt_tokens} | {s.cached_tokens} "
                f"| {_pct(s.cached_ratio)} | synthetic | synthetic |"
            )
        s_ours, s_naive = _pair(sim)
        if s_ours is not None and s_naive is not None:
            ratios.append(
                "Simulated SGLang, ragtime's layout over question first: cached-token ratio "
                f"{_x(ratio(s_ours.summary.cached_ratio, s_naive.summary.cached_ratio))}."
            )
    intro = (
        f"## {number}. Prefix caching: ragtime's layout vs question first\n\n"
        "ragtime's prompt puts the stable parts first (the system prompt, byte-identical on every "
        "request), then the passages in rank order, then the question "
        f"(`{LAYOUT_VARIABLE}={OURS}`); the naive layout puts the question first "
        f"(`{NAIVE}`), so only the system prompt can be reused. The questions are "
        "`demo/questions-grouped.txt`: 6 topics x 4 phrasings, in groups of consecutive "
        "follow-ups that retrieve overlapping passages, sent in order by one user. The "
        "cached-token ratio is the sum of the `done` events' `usage.cached_tokens` over the sum "
        "of their `usage.prompt_tokens`; `n` is the number of answers behind it.\n\n"
        "- llama.cpp (the CPU default, answers capped at 16 tokens since TTFT is what matters): "
        "two servers, `benchmarks/prefix-shared.env` and `benchmarks/prefix-naive.env`, "
        "alternating round by round. llama.cpp reuses the KV cache of the previous prompt of its "
        "own process, up to the first token that differs, so each server keeps its own cache "
        "and the other's requests do not disturb it.\n"
        "- Simulated SGLang (`bench/sglang_sim`, a trie of every finished request's tokens, as "
        "RadixAttention keeps): two servers generating with `SGLangBackend` and the tiny "
        "tokenizer the simulated server serves (`benchmarks/prefix-sim-shared.env` and "
        "`benchmarks/prefix-sim-naive.env`), each against a simulated server of its own, "
        "started empty, alternating round by round. Its TTFT is synthetic, so only its "
        "cached-token ratio is reported."
    )
    if sim is not None:
        intro += f" Measured {sim.created}."
    body = intro + "\n\n" + "\n".join(rows)
    if ratios:
        body += "\n\n" + " ".join(ratios)
    return body


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _x(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"
