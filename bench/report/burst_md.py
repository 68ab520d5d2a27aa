"""BENCHMARKS.md's section on bursts and admission by predicted finish (issue 22 §1), written
from ``ragtime bench burst`` JSON files: each target row with the previous figure, this run's,
the target, and whether it was met; the users' closed loops against the simulated GPU server."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bench.report.budget_md import splice
from bench.suites.burst.results import (
    TARGETS,
    USERS_TARGET_USEFUL,
    USERS_TARGET_WITHIN,
    BurstBench,
    BurstResult,
)

BEGIN = "<!-- bursts: written by `ragtime bench section --burst` -->"
END = "<!-- /bursts -->"
TITLE = "## 8. Bursts: admission by predicted finish"


def read_burst_json(path: Path) -> BurstBench:
    return BurstBench.model_validate_json(path.read_text())


def _find(bench: BurstBench | None, size: int, budget_s: float) -> BurstResult | None:
    if bench is None:
        return None
    return next((b for b in bench.bursts if (b.size, b.budget_s) == (size, budget_s)), None)


def _answered(b: BurstResult | None) -> str:
    if b is None:
        return "n/a"
    each = ", ".join(str(r.answered) for r in b.repeats)
    return f"{b.answered_median:g} ({each})"


def _late(b: BurstResult | None) -> str:
    if b is None:
        return "n/a"
    wire = sum(r.late_on_wire for r in b.repeats)
    return f"{b.late_total} ({wire} on the wire)"


def _refusal(b: BurstResult | None) -> str:
    if b is None:
        return "n/a"
    server = "-" if b.refusal_ms_p99_max is None else f"≤ {b.refusal_ms_p99_max:g}"
    read = b.refusal_after_read_ms_p99_max
    after_read = "-" if read is None else f"≤ {read:g}"
    wire = "-" if b.refusal_wire_ms_p99_max is None else f"{b.refusal_wire_ms_p99_max:.0f}"
    return f"{server} ({after_read}; {wire})"


def _unrefused(b: BurstResult) -> bool:
    """Whether ``b`` has a refusal target and no run refused a request, so it held vacuously."""
    return b.target_refusal_ms_p99 is not None and b.refusal_ms_p99_max is None


def why_missed(b: BurstResult) -> str:
    """Why a burst missed its target, from what the run measured ("" when it did not miss)."""
    if b.met is not False:
        return ""
    reasons = []
    least, p99 = b.target_answered, b.target_refusal_ms_p99
    if least is not None and b.answered_median < least:
        reasons.append(f"answered {b.answered_median:g} (median) against {least}")
    if b.late_total:
        wire = sum(r.late_on_wire for r in b.repeats)
        sent = max((r.sent_ms_max or 0.0) for r in b.repeats)
        reasons.append(
            f"{b.late_total} late counted from the burst's start, {wire} of them on the wire: "
            f"the rest were written by the client up to {sent:.0f} ms after the burst began, "
            "too late for the server to know"
        )
    if b.errors_total:
        reasons.append(f"{b.errors_total} errors")
    server = b.refusal_ms_p99_max
    if p99 is not None and server is not None and server > p99:
        lag, read, wait = (
            b.loop_lag_ms_p99_max,
            b.refusal_after_read_ms_p99_max,
            b.socket_wait_ms_p99_max,
        )
        gap = b.body_gap_ms_p99_max
        decided = (
            f"each refusal was sent within {read:g} ms of the request's read (p99), a read "
            "that waits for the body the client writes apart from the head"
            + (f" (up to {gap:.0f} ms after it here, p99)" if gap is not None else "")
            + ", and a thread that, woken, waits for the interpreter's lock while the event "
            "loop's and the stages' threads work, and for a core"
            if read is not None
            else "each refusal is decided as soon as the request is read"
        )
        if wait is not None:
            waited = (
                f"the requests' bytes waited ≤ {wait:g} ms at p99 in the kernel before they "
                "were read (the connection's own figure), behind the work of the requests "
                "read before them on these 2 cores"
                + (f", while the loop's lag was ≤ {lag:g} ms at p99" if lag is not None else "")
            )
        elif lag is not None:
            waited = (
                f"while the bursts ran, the loop's lag was ≤ {lag:g} ms at p99 (a measurement "
                "every 10 ms): a request may have waited that long on the socket before the loop "
                "read it, behind the work of the requests admitted before it on these 2 cores"
            )
        else:
            waited = ""
        reasons.append(
            f"refusal p99 ≤ {server:g} ms on the server against {p99:g} ms: {decided}, but its "
            "clock starts when the request reached the socket" + (f"; {waited}" if waited else "")
        )
    return "; ".join(reasons) + "." if reasons else ""


def section(now: Sequence[BurstBench], before: BurstBench | None) -> str:
    lines = [TITLE, ""]
    for bench in now:
        lines.append(f"`{bench.command}` ({bench.created})")
        lines.append("")
    if before is not None:
        lines += [f"Previous: `{before.command}` ({before.created}).", ""]
    lines += [
        "Each burst sends SIZE streamed `/v1/ask` requests at the same instant, each with the "
        "budget shown, from a fresh client, after a warm-up; 3 runs each, the median shown with "
        "each run's figure. **Answered**: a complete answer the client received within its "
        "budget. **Late**: any response the client got past its budget, counted from the "
        "burst's start; *on the wire*: past its budget counted from when the client had "
        "written that request (the rest were sent late by the client, which shares the "
        "server's 2 cores). **Refusal p99**: the server's own, arrival to 503 sent "
        "(`ragtime_admission_refusal_seconds`, the bound of the bucket holding the 99th "
        "percentile); in brackets, the server's from the request's read to its 503 sent "
        "(`ragtime_admission_refusal_after_read_seconds`: a refusal is decided as the request "
        "is read, in the HTTP protocol, `app/frontdoor/protocol.py`, or with the read-ahead "
        "plug-in by a thread that reads ahead of the event loop, `app/frontdoor/read_ahead/`), "
        "then as the client saw it on the wire.",
        "",
        "| burst | budget | answered, previous | answered, now | target | late, previous | late, "
        "now | refusal p99 ms, now: server (after read; wire) | 504 / errors, now | met |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (size, budget_s), (least, p99) in TARGETS.items():
        cur = next((b for bench in now if (b := _find(bench, size, budget_s))), None)
        old = _find(before, size, budget_s)
        target = f">= {least}" + (f", refusals p99 <= {p99:g} ms" if p99 is not None else "")
        target += ", none late"
        failed = "n/a"
        if cur is not None:
            n504 = sum(r.timed_out_504 for r in cur.repeats)
            failed = f"{n504} / {cur.errors_total}"
        met = "n/a" if cur is None or cur.met is None else ("met" if cur.met else "**missed**")
        if cur is not None and cur.met and _unrefused(cur):
            met += " (no request refused: the refusal target was not put to the test)"
        lines.append(
            f"| {size} | {budget_s:g} s | {_answered(old)} | {_answered(cur)} | {target} | "
            f"{_late(old)} | {_late(cur)} | {_refusal(cur)} | {failed} | {met} |"
        )
    whys = []
    for size, budget_s in TARGETS:
        cur = next((b for bench in now if (b := _find(bench, size, budget_s))), None)
        if cur is not None and (why := why_missed(cur)):
            whys.append(f"- {size} at {budget_s:g} s, missed: {why}")
    if whys:
        lines += ["", "Why the missed rows miss:", "", *whys]
    users = [u for bench in now for u in bench.users]
    if users:
        lines += [
            "",
            f"Users asking back to back against the simulated SGLang server (GPU-like timings, "
            f"synthetic): **useful** is a 200 with 5 or more words within budget; targets "
            f">= {USERS_TARGET_USEFUL:.0%} useful and >= {USERS_TARGET_WITHIN:.1%} within budget. "
            "Before this change the same runs got 100%, 88% and 90% useful: 2, 12 and 10 answers "
            "cut at their deadline arrived 2-10 ms late, behind the abort's round trip.",
            "",
            "| users | budget | useful | within budget | 503 | 504 | late or failed | "
            "TTFT p50 ms | met |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for u in users:
            lines.append(
                f"| {u.users} | {u.budget_ms} ms | {u.useful}/{u.requests} ({u.useful_share:.0%}) "
                f"| {u.within_share:.1%} | {u.refused_503} | {u.timed_out_504} | {u.other} | "
                f"{u.ttft_ms_p50} | {'met' if u.met else '**missed**'} |"
            )
    return BEGIN + "\n" + "\n".join(lines) + "\n" + END


def write_section(out: Path, now: Sequence[BurstBench], before: BurstBench | None) -> None:
    text = out.read_text() if out.exists() else ""
    out.write_text(splice(text, section(now, before), begin=BEGIN, end=END))
