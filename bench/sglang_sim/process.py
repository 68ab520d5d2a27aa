"""The simulated SGLang server as a process of its own, for a bench run.

``simulated_sglang(spec, log_dir=...)`` builds the tokenizer it serves (every word of the demo
corpus), starts ``python -m bench.sglang_sim`` on a free port with the timings of ``spec``
(``'fixed_ms=30,decode_ms_per_token=10,max_running=8'``), and yields its URL and the settings
that point ragtime at it; the process is stopped on exit.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.sglang_sim.tokenizer import build_corpus_tokenizer


@dataclass(frozen=True)
class SimulatedServer:
    url: str
    tokenizer_dir: Path
    model: str = "fake/tiny-chat"

    @property
    def ragtime_config(self) -> dict[str, str]:
        return {
            "RAGTIME_GENERATION_BACKEND": "sglang",
            "RAGTIME_SGLANG_ENDPOINTS": json.dumps([self.url]),
            "RAGTIME_SERVED_MODEL": self.model,
            "RAGTIME_SERVED_TOKENIZER": str(self.tokenizer_dir),
        }


def spec_args(spec: str) -> list[str]:
    """``'fixed_ms=30,max_running=8'`` -> ``['--fixed-ms', '30', '--max-running', '8']``; a
    launch switch is ``name=true`` (given) or ``name=false`` (left out):
    ``'enable_priority_scheduling=true'`` -> ``['--enable-priority-scheduling']``."""
    args: list[str] = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, _, value = part.partition("=")
        value = value.strip()
        if not value:
            raise ValueError(f"simulated SGLang spec: expected name=value, got {part!r}")
        flag = "--" + name.strip().replace("_", "-")
        if value.lower() in ("true", "false"):
            args += [flag] if value.lower() == "true" else []
        else:
            args += [flag, value]
    return args


@contextmanager
def simulated_sglang(
    spec: str, *, log_dir: Path, name: str = "sglang-sim"
) -> Iterator[SimulatedServer]:
    """Start ``python -m bench.sglang_sim`` with ``spec``; stop it on exit. Its log is
    ``log_dir/NAME.log``."""
    tokenizer = build_corpus_tokenizer(log_dir.parent / "sglang-sim-tokenizer")
    log_dir.mkdir(parents=True, exist_ok=True)
    log = (log_dir / f"{name}.log").open("w")
    argv = [sys.executable, "-m", "bench.sglang_sim", "--port", "0", *spec_args(spec)]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        match = re.search(r"listening on (http://\S+)", line)
        if match is None:
            raise RuntimeError(f"the simulated SGLang server did not start: {line!r}")
        yield SimulatedServer(match.group(1), tokenizer)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def with_simulated_sglang(
    stack: ExitStack, config: dict[str, str], spec: str | None, *, log_dir: Path, name: str
) -> dict[str, str]:
    """``config`` pointed at a simulated SGLang server of its own (started on ``stack``) when
    ``spec`` is given and the config generates with SGLang; else ``config`` unchanged."""
    if spec is None or config.get("RAGTIME_GENERATION_BACKEND") != "sglang":
        return config
    server = stack.enter_context(simulated_sglang(spec, log_dir=log_dir, name=f"{name}-sglang"))
    return {**config, **server.ragtime_config}
