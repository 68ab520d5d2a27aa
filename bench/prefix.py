"""Prefix caching: ragtime's prompt layout against the naive one, for BENCHMARKS.md.

Two sources feed the section. The llama.cpp half is an ordinary ``ragtime bench load`` run of
two servers that differ only in ``RAGTIME_PROMPT_LAYOUT`` (``benchmarks/prefix-shared.env`` and
``benchmarks/prefix-naive.env``), alternating round by round over grouped questions with one
user; the cached-token ratio comes from the ``done`` events' ``usage``. The fake-server half is
written by ``tests/bench/test_prefix_cache_fake_sglang.py`` (``PrefixFakeResult``, when
``RAGTIME_BENCH_PREFIX_FAKE_JSON`` names a file): the real app against the fake SGLang server's
prefix cache, whose timings are synthetic, so only its cached-token ratios are reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from bench.results import BenchResult, Run
from bench.stats import ratio

LAYOUT_VARIABLE = "RAGTIME_PROMPT_LAYOUT"
OURS = "shared_prefix_first"
NAIVE = "question_first"
FAKE_ENV = "RAGTIME_BENCH_PREFIX_FAKE_JSON"
FAKE_TEST = "tests/bench/test_prefix_cache_fake_sglang.py"
FAKE_COMMAND = f"{FAKE_ENV}=bench-results/prefix-fake.json python -m pytest -q {FAKE_TEST}"


class LayoutCache(BaseModel):
    """One layout's prompt and cached tokens, summed over its answered requests."""

    layout: str
    n: int = Field(description="Answered requests that reported usage.")
    prompt_tokens: int
    cached_tokens: int
    cached_ratio: float | None


class PrefixFakeResult(BaseModel):
    """The fake-server measurement: each layout's cached-token ratio over the same questions."""

    created: str
    server: str
    questions: str
    layouts: list[LayoutCache]
    notes: list[str] = Field(default_factory=list)


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


def write_fake_json(result: PrefixFakeResult, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(result.model_dump_json(indent=1) + "\n")


def read_fake_json(path: Path) -> PrefixFakeResult:
    return PrefixFakeResult.model_validate_json(path.read_text())


def run_layouts(result: BenchResult) -> list[tuple[str, Run]]:
    """Each run of ``result`` with the prompt layout of its server (ragtime's by default)."""
    layouts = {t.name: t.config.get(LAYOUT_VARIABLE, OURS) for t in result.targets}
    return [(layouts.get(run.target, OURS), run) for run in result.runs]


def _pair(result: BenchResult) -> tuple[Run | None, Run | None]:
    runs = run_layouts(result)
    ours = next((r for layout, r in runs if layout == OURS), None)
    naive = next((r for layout, r in runs if layout == NAIVE), None)
    return ours, naive


def _fake_pair(fake: PrefixFakeResult) -> tuple[LayoutCache | None, LayoutCache | None]:
    ours = next((c for c in fake.layouts if c.layout == OURS), None)
    naive = next((c for c in fake.layouts if c.layout == NAIVE), None)
    return ours, naive


def prefix_summary(result: BenchResult | None, fake: PrefixFakeResult | None) -> str:
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
    if fake is not None:
        f_ours, f_naive = _fake_pair(fake)
        if f_ours is not None and f_naive is not None:
            lines.append(
                f"- Against the fake SGLang server's prefix cache (synthetic timings): "
                f"cached-token ratio {_pct(f_ours.cached_ratio)} against "
                f"{_pct(f_naive.cached_ratio)} (n={f_ours.n} and {f_naive.n})."
            )
    return "".join("\n" + line for line in lines)


def prefix_section(result: BenchResult | None, fake: PrefixFakeResult | None, number: int) -> str:
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
    if fake is not None:
        for cache in sorted(fake.layouts, key=lambda c: c.layout != OURS):
            rows.append(
                f"| fake SGLang (RadixAttention-like trie) | `{cache.layout}` | {cache.n} "
                f"| {cache.prompt_tokens} | {cache.cached_tokens} | {_pct(cache.cached_ratio)} "
                "| synthetic | synthetic |"
            )
        f_ours, f_naive = _fake_pair(fake)
        if f_ours is not None and f_naive is not None:
            ratios.append(
                "Fake SGLang, ragtime's layout over question first: cached-token ratio "
                f"{_x(ratio(f_ours.cached_ratio, f_naive.cached_ratio))}."
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
        "- Fake SGLang (`tests/fakes/sglang_server.py`, a trie of every finished request's "
        "tokens, as RadixAttention keeps): the real app with `SGLangBackend` and a tiny test "
        "tokenizer, in-process, both layouts over the same questions from an empty cache, on "
        f"the app tests' seeded subset of the corpus (`{FAKE_TEST}`). Its TTFT is synthetic, "
        "so only its cached-token ratio is reported."
    )
    if fake is not None:
        intro += f" Measured {fake.created}."
    body = intro + "\n\n" + "\n".join(rows)
    if ratios:
        body += "\n\n" + " ".join(ratios)
    return body


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _x(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"
