"""Load runs and benchmarks: what users feel, measured by one harness anyone can rerun.

``ragtime bench load`` (``bench.cli``) drives servers that run in their own processes
(``serve``: ragtime from a config file, or the bare FastAPI ``floor``) with streamed questions,
in closed loops of N users or open-loop Poisson arrivals (``arrivals``), and records per request
what the ``client`` saw: TTFT, inter-token latency, end to end, budget, degradations, stages.
``runner`` alternates targets and sweeps rates; ``results`` summarises (percentiles from
``stats``, with sample counts) and is the schema of the ``--json`` file; ``plots`` draws it;
``benchmarks_md`` writes BENCHMARKS.md for ``make bench``.
"""

from bench.client import RequestRecord, Target
from bench.results import BenchResult, Run, RunSummary
from bench.runner import LoadSpec, measure, sweep
from bench.stats import Summary, summarize

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
