"""The fake SGLang server of the tests, started as a process of its own for a bench run.

The fake (``tests/fakes/sglang_server.py``) follows upstream SGLang's protocol and, configured
with GPU-like timings (a fixed cost and a cost per uncached prompt token before the first token,
a cost per output token, a running batch of at most ``max_running``), stands in for a GPU server
that our machines do not have. It is a test double: it lives in ``tests/`` and is only ever
started from a checkout, by the bench. The served tokenizer is a word-level one built from the
demo corpus's words (``tests/fakes/tiny_tokenizer.py``), so that prompts are real token ids.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "demo" / "corpus"


@dataclass(frozen=True)
class FakeSGLang:
    url: str
    tokenizer_dir: Path

    @property
    def ragtime_config(self) -> dict[str, str]:
        return {
            "RAGTIME_GENERATION_BACKEND": "sglang",
            "RAGTIME_SGLANG_ENDPOINTS": json.dumps([self.url]),
            "RAGTIME_SERVED_MODEL": "fake/tiny-chat",
            "RAGTIME_SERVED_TOKENIZER": str(self.tokenizer_dir),
        }


def spec_args(spec: str) -> list[str]:
    """``'fixed_ms=30,max_running=8'`` -> ``['--fixed-ms', '30', '--max-running', '8']``."""
    args: list[str] = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, _, value = part.partition("=")
        if not value:
            raise ValueError(f"fake SGLang spec: expected name=value, got {part!r}")
        args += ["--" + name.strip().replace("_", "-"), value.strip()]
    return args


def build_tokenizer(directory: Path) -> Path:
    """The tests' word-level tokenizer, with every word of the demo corpus in its vocabulary."""
    words = sorted(
        {w.lower() for f in CORPUS.rglob("*.txt") for w in re.findall(r"\w+", f.read_text())}
    )
    code = (
        "import sys; from pathlib import Path; "
        "from tests.fakes.tiny_tokenizer import build_tiny_tokenizer; "
        "build_tiny_tokenizer(Path(sys.argv[1]), sys.stdin.read())"
    )
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-c", code, str(directory)],
        input=" ".join(words),
        text=True,
        check=True,
        cwd=REPO,
    )
    return directory


@contextmanager
def fake_sglang_server(spec: str, *, log_dir: Path) -> Iterator[FakeSGLang]:
    """Start ``python -m tests.fakes.sglang_server`` with ``spec``; stop it on exit."""
    tokenizer = build_tokenizer(log_dir.parent / "fake-sglang-tokenizer")
    log_dir.mkdir(parents=True, exist_ok=True)
    log = (log_dir / "fake-sglang.log").open("w")
    argv = [sys.executable, "-m", "tests.fakes.sglang_server", "--port", "0", *spec_args(spec)]
    process = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        match = re.search(r"listening on (http://\S+)", line)
        if match is None:
            raise RuntimeError(f"the fake SGLang server did not start: {line!r}")
        yield FakeSGLang(match.group(1), tokenizer)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
