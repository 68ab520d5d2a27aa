"""The budget engine's section of BENCHMARKS.md: goodput per budget, and each saving's cost.

Written by ``ragtime bench section`` from the JSON files of ``ragtime bench budget --budgets``
(one per run: the CPU default, the fake SGLang server with GPU-like timings) and of ``ragtime
bench quality``, between two markers, so that it is replaced in place and the rest of the file
is left as ``ragtime bench report`` wrote it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bench.suites.budget.goodput import TARGET_USEFUL, TARGET_WITHIN, GoodputResult, table, verdicts
from bench.suites.quality.measure import QualityResult
from bench.suites.quality.tables import table as quality_table

BEGIN = "<!-- budget-engine: written by `ragtime bench section` -->"
END = "<!-- /budget-engine -->"
ANCHOR = "## Reading these numbers"


def section(goodputs: Sequence[GoodputResult], quality: QualityResult | None) -> str:
    parts = [
        "## 6. The budget engine: useful answers per budget, and what each saving costs",
        "Each run below starts its server, measures the unconstrained p50 (1 user, a budget "
        "nothing constrains), then drives each budget (a multiple of that p50) at each load "
        "with a question mix in which about a third of the questions repeat a recent one; then "
        "sends a run of cache hits (one question, over and over) and drives the same cells "
        "again. **Useful**: HTTP 200 whose answer has at least three words, within budget (the "
        "headline). **Within**: the response, an answer or a 504, came back within the budget. "
        "**504**: refused because not even the smallest plan fitted (within budget, never "
        "useful). *Smallest plan fits*: the server's own cost model, read after the baseline "
        "(`GET /v1/budget/model`), predicts the smallest plan (64 context tokens, 16 output "
        "tokens, no rerank) within the budget at p90. Targets: at least "
        f"{TARGET_WITHIN:.0%} within in every cell; at least {TARGET_USEFUL:.0%} useful where "
        "the smallest plan fits; no cell with fewer useful answers after the cache hits.",
    ]
    for result in goodputs:
        met = verdicts(result)
        lines = [
            f"### {', '.join(s.server for s in result.servers)} ({result.created})",
            f"`{result.command}`",
        ]
        for s in result.servers:
            fake = s.config.get("RAGTIME_SGLANG_ENDPOINTS")
            what = (
                f"the fake SGLang server at {fake} (GPU-like timings; its figures are synthetic)"
                if fake
                else "the CPU default (SmolLM2-135M through llama.cpp on our 2 cores)"
            )
            lines.append(
                f"{s.server}: {what}. Unconstrained p50 {s.unconstrained_p50_ms:.0f} ms "
                f"(n={s.baseline.n}); its model predicts the smallest plan at "
                f"{s.plan_bounds.get('smallest_ms', 0):.0f} ms and the full plan at "
                f"{s.plan_bounds.get('full_ms', 0):.0f} ms."
            )
        lines.append(table(result.cells))
        lines.extend(result.notes)
        lines.append(
            "Targets: "
            + "; ".join(
                f"{name.replace('_', ' ')}: **{'met' if ok else 'NOT met'}**"
                for name, ok in met.items()
            )
            + "."
        )
        parts.append("\n\n".join(lines))
    if quality is not None:
        parts.append(
            "\n\n".join(
                [
                    f"### What each saving costs in answer quality ({quality.created})",
                    f"`{quality.command}`",
                    f"{quality.questions} questions, {quality.model or 'the CPU default'}, "
                    f"{quality.context_tokens} context tokens and {quality.max_output_tokens} "
                    f"output tokens in the full plan. Quality kept: {quality.measure}. "
                    "Milliseconds saved: the prompt and answer tokens a saving removes, priced "
                    "at the full plan's measured rates (median full-plan generation "
                    f"{quality.full_generate_ms_p50:.0f} ms). These curves are "
                    "`tracing/budget/quality.json`, which the policy weighs its choices "
                    "with: as measured for this model (its `models` entry), capped at 100% and "
                    "monotone for any other (the default); rerank is not measured (no "
                    "cross-encoder ships offline) and keeps an assumed curve.",
                    quality_table(quality),
                ]
            )
        )
    return BEGIN + "\n" + "\n\n".join(parts) + "\n" + END


def splice(
    document: str, block: str, *, begin: str = BEGIN, end: str = END, anchor: str = ANCHOR
) -> str:
    """``document`` with its block between ``begin`` and ``end`` (the budget-engine block by
    default) replaced by ``block`` (inserted before ``anchor``, or at the end, when it has none
    yet)."""
    if begin in document and end in document:
        head, rest = document.split(begin, 1)
        _, tail = rest.split(end, 1)
        return head + block + tail
    if anchor in document:
        head, tail = document.split(anchor, 1)
        return head + block + "\n\n" + anchor + tail
    return document.rstrip() + "\n\n" + block + "\n"


def write_section(
    out: Path, goodputs: Sequence[GoodputResult], quality: QualityResult | None
) -> None:
    out.write_text(splice(out.read_text() if out.exists() else "", section(goodputs, quality)))
