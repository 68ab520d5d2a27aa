"""Load runs and benchmarks: what users feel, measured by one harness anyone can rerun.

``ragtime bench X`` (``bench.cli``) runs the suite ``bench.suites.X``. What every suite shares
is the ``harness``: servers that run in their own processes (``serve``: ragtime from a config
file, or the bare FastAPI ``floor``), driven with streamed questions in closed loops of N users
or open-loop Poisson arrivals (``arrivals``, ``runner``), each request recorded as the
``client`` saw it: TTFT, inter-token latency, end to end, budget, degradations, stages.
``results`` summarises (percentiles from ``stats``, with sample counts) and is the schema of
the ``--json`` file; ``plots`` draws it. ``report`` writes BENCHMARKS.md for ``make bench``;
``sglang_sim`` is a simulated SGLang server; ``studies`` are one-off measurements.
"""

from bench.harness.client import RequestRecord, Target
from bench.harness.results import BenchResult, Run, RunSummary
from bench.harness.runner import LoadSpec, measure, sweep
from bench.harness.stats import Summary, summarize

__all__ = [
    "BenchResult",
    "LoadSpec",
    "RequestRecord",
    "Run",
    "RunSummary",
    "Summary",
    "Target",
    "measure",
    "summarize",
    "sweep",
]
