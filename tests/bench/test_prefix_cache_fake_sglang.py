"""Prefix caching against the simulated SGLang server: ragtime's layout against question first.

The real app answers the grouped questions through ``SGLangBackend``, once per prompt layout,
each time from an empty cache of the simulated server (a trie of every finished request's
tokens, as RadixAttention keeps). ragtime's layout must get a strictly higher cached-token
ratio. ``make bench`` measures the same with real processes (``ragtime bench load
--fake-sglang``, ``bench/report/prefix_md.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.harness.commands import read_questions
from bench.report.prefix_md import NAIVE, OURS, LayoutCache, layout_cache
from bench.sglang_sim.server import SimulatedSGLang
from bench.sglang_sim.tokenizer import build_tiny_tokenizer
from inference import HFTokenizer, SGLangBackend
from retrieval import Embedder
from tests.fakes._serve import ServerThread
from tests.helpers.app import running_app
from tests.helpers.sse import parse_sse

pytestmark = pytest.mark.slow

QUESTIONS = Path(__file__).resolve().parents[2] / "demo" / "questions-grouped.txt"


@pytest.fixture(scope="module")
def fake_sglang() -> Iterator[tuple[SimulatedSGLang, str]]:
    fake = SimulatedSGLang()
    with ServerThread(fake.app) as server:
        yield fake, server.url


def measure_layout(
    layout: str, questions: list[str], data_dir: Path, key: str, url: str, tokenizer_dir: Path
) -> LayoutCache:
    tokenizer = HFTokenizer(tokenizer_dir, local_files_only=True)
    backend = SGLangBackend([url], model="fake/tiny-chat", tokenizer=tokenizer)
    usages: list[tuple[int, int]] = []
    with running_app(  # no calibration probes: only the questions' requests are counted
        data_dir,
        backend=backend,
        embedder=Embedder(),  # the real MiniLM: the passages real questions retrieve
        prompt_layout=layout,
        max_output_tokens=4,
        calibrate=False,
    ) as client:
        for question in questions:
            response = client.post(
                "/v1/ask",
                json={"question": question, "stream": True},
                headers={"Authorization": f"Bearer {key}"},
            )
            assert response.status_code == 200, response.text
            done = [
                data for event, data in parse_sse(response.text.splitlines()) if event == "done"
            ]
            assert done, response.text
            usage = done[0]["usage"]
            usages.append((usage["prompt_tokens"], usage["cached_tokens"]))
    return layout_cache(layout, usages)


def test_ragtimes_layout_is_cached_more_than_question_first(
    minilm_data_dir: Path,
    minilm_api_key: str,
    fake_sglang: tuple[SimulatedSGLang, str],
    tmp_path: Path,
) -> None:
    fake, url = fake_sglang
    questions = read_questions(QUESTIONS)
    assert len(questions) == 24
    tokenizer_dir = build_tiny_tokenizer(tmp_path)
    measured: list[LayoutCache] = []
    for layout in (OURS, NAIVE):
        fake.reset(natural_tokens=4)  # an empty cache for each layout
        measured.append(
            measure_layout(layout, questions, minilm_data_dir, minilm_api_key, url, tokenizer_dir)
        )
        assert len(fake.generate_requests) == len(questions)
    ours, naive = measured
    assert ours.n == naive.n == len(questions)
    assert ours.cached_ratio is not None and naive.cached_ratio is not None
    assert ours.cached_ratio > naive.cached_ratio, measured
