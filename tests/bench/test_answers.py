"""``ragtime bench answers`` (bench/suites/answers.py): ``eval answers`` against a server it
starts from a config and stops afterwards, with the config's key; and its section of
BENCHMARKS.md (bench/report/answers_md.py), one block a set, written in place."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.cli.commands import main
from app.evaluation.client import AnswersClient
from app.evaluation.dataset import Case
from app.evaluation.report import answers_json, summarise
from app.evaluation.scoring import Scored
from bench.harness.serve import ServerFailed
from bench.report.answers_md import BEGIN, END, read_answers_json, write_section
from tests.fakes.answer_modes import AnswerModesServer
from tests.helpers.bench_results import null_config

CASES = [
    {"id": "q1", "kind": "answerable", "question": "How do I give a parameter a default value?",
     "sources": [{"source": "defaults.md", "section": ""}], "facts": [["name=value"]]},
    {"id": "q2", "kind": "unanswerable", "question": "How big is a Django connection pool?"},
]  # fmt: skip


@pytest.fixture
def answer_set(tmp_path: Path) -> Path:
    (tmp_path / "set" / "documents").mkdir(parents=True)
    (tmp_path / "set" / "documents" / "defaults.md").write_text("# Defaults\n\nname=value\n")
    path = tmp_path / "set" / "answers.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in CASES))
    return path


def record(dataset: str, mode: str | None = "extract", **row: Any) -> dict[str, Any]:
    """What ``eval answers --json`` writes for one run of two questions."""
    scored = [
        Scored(Case.model_validate(CASES[0]), 200, "name=value", report={"answer_mode": mode}),
        Scored(Case.model_validate(CASES[1]), 200, "I don't know."),
    ]
    summary = summarise(scored, budget_ms=4000, ttft_target_ms=None, mode=mode).model_dump()
    return {
        "schema_version": "ragtime-eval-answers/2",
        "dataset": dataset,
        "questions": 2,
        "url": "http://127.0.0.1:1",
        "collection": f"eval-{dataset}",
        "when": "2026-12-07T12:00:00+00:00",
        "command": f"ragtime bench answers --dataset {dataset}",
        "runs": [{"row": summary | row, "answers": answers_json(scored)}],
    }


def test_the_section_goes_before_the_reading_notes_and_is_replaced_in_place(
    tmp_path: Path,
) -> None:
    out = tmp_path / "BENCHMARKS.md"
    out.write_text("# ragtime benchmarks\n\n## Reading these numbers\n\n- notes\n")
    write_section(out, [record("python-docs", "generate")])
    write_section(out, [record("python-docs"), record("debian-faq")])
    text = out.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    assert text.index(END) < text.index("## Reading these numbers")
    assert "| generate | 4000 |" not in text and text.count("| extract | 4000 | none |") == 4
    assert text.index("### python-docs") < text.index("### debian-faq")
    assert "2 questions (1 answerable, 1 unanswerable)" in text


def test_the_section_command_reads_each_set_and_an_older_record(tmp_path: Path) -> None:
    older = record("python-docs")
    older["schema_version"] = "ragtime-eval-answers/1"
    for name in ("mode", "loops", "answer_modes", "abstained", "grounded_recall"):
        del older["runs"][0]["row"][name]  # a record from before the answer modes
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps(older))
    second.write_text(json.dumps(record("debian-faq")))
    out = tmp_path / "BENCHMARKS.md"
    argv = ["bench", "section", "--answers", str(first), "--answers", str(second)]
    assert main([*argv, "--out", str(out)]) == 0
    text = out.read_text()
    assert "| default | 4000 | none | 2/2 (0) | – | – |" in text  # no modes, no loops
    assert "### debian-faq" in text and "| extract | 4000 | none | 2/2 (0) | extract 1 |" in text
    (tmp_path / "other.json").write_text('{"rows": []}')
    with pytest.raises(ValueError, match="not a `ragtime eval answers` result"):
        read_answers_json(tmp_path / "other.json")


class StandIn:
    """``ragtime_server``'s place: a server that is never started, whose URL the stand-in
    transport answers at."""

    url = "http://127.0.0.1:9"

    def __init__(self) -> None:
        self.started: list[tuple[str, dict[str, str], Path | None]] = []
        self.stopped = 0
        self.fails = False

    def __call__(self, name: str, config: dict[str, str], *, log_dir: Path | None = None) -> Any:
        @contextmanager
        def serving() -> Iterator[StandIn]:
            self.started.append((name, config, log_dir))
            if self.fails:
                raise ServerFailed("server 'answers-x' exited with status 1; log x.log:\nboom")
            try:
                yield self
            finally:
                self.stopped += 1

        return serving()


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> tuple[StandIn, AnswerModesServer]:
    server, started = AnswerModesServer(), StandIn()

    def asking(url: str, key: str, collection: str, **options: Any) -> AnswersClient:
        return AnswersClient(url, key, collection, transport=httpx.MockTransport(server), **options)

    monkeypatch.setattr("app.evaluation.client.AnswersClient", asking)
    monkeypatch.setattr("bench.harness.serve.ragtime_server", started)
    return started, server


def test_a_server_is_started_from_the_config_asked_with_its_key_and_stopped(
    stand_in: tuple[StandIn, AnswerModesServer], answer_set: Path, tmp_path: Path
) -> None:
    started, server = stand_in
    config = tmp_path / "cpu.env"
    config.write_text("RAGTIME_DATA_DIR=/tmp/x\nRAGTIME_API_KEY=rt_config\n")
    out = tmp_path / "answers.json"
    argv = ["bench", "answers", "--serve", str(config), "--dataset", str(answer_set)]
    argv += ["--modes", "generate,extract", "--budgets", "4000", "--log-dir", str(tmp_path)]
    assert main([*argv, "--json", str(out)]) == 0
    assert started.started == [
        ("answers-cpu", {"RAGTIME_DATA_DIR": "/tmp/x", "RAGTIME_API_KEY": "rt_config"}, tmp_path)
    ]
    assert started.stopped == 1
    assert {url.split("/v1/")[0] for url in server.urls} == {StandIn.url}
    assert set(server.keys) == {"Bearer rt_config"} and len(server.bodies) == 4
    run = read_answers_json(out)
    assert [r["row"]["mode"] for r in run["runs"]] == ["generate", "extract"]
    assert run["url"] == StandIn.url and "rt_config" not in out.read_text()


def test_a_server_that_does_not_start_or_two_servers_are_one_line(
    stand_in: tuple[StandIn, AnswerModesServer],
    answer_set: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    started, _ = stand_in
    config = tmp_path / "cpu.env"
    config.write_text("RAGTIME_API_KEY=rt_config\n")
    argv = ["bench", "answers", "--serve", str(config), "--dataset", str(answer_set)]
    assert main([*argv, "--url", "http://127.0.0.1:9"]) == 1
    assert capsys.readouterr().err.strip() == "error: give --serve or --url, not both"
    started.fails = True
    assert main(argv) == 1
    assert "error: server 'answers-x' exited with status 1" in capsys.readouterr().err
    config.write_text("not a config\n")
    assert main(argv) == 1
    assert "expected KEY=VALUE" in capsys.readouterr().err


@pytest.mark.slow
def test_a_run_against_a_real_server_on_the_null_backend(
    minilm_data_dir: Path, minilm_api_key: str, answer_set: Path, tmp_path: Path
) -> None:
    # A copy: the set's collection goes into the data dir, which the other slow tests share.
    data_dir = tmp_path / "data"
    shutil.copytree(minilm_data_dir, data_dir, ignore=shutil.ignore_patterns("models"))
    config = null_config(tmp_path, data_dir, minilm_api_key)
    with config.open("a") as extra:  # the shared copy of the exported embedder
        extra.write(f"RAGTIME_EMBEDDING_CACHE_DIR={minilm_data_dir / 'models'}\n")
        # The null backend writes every answer: the set's four small documents are not what
        # the abstention threshold was calibrated on.
        extra.write("RAGTIME_ANSWERABLE_MIN_SIMILARITY=-1\n")
    out = tmp_path / "answers.json"
    argv = ["bench", "answers", "--serve", str(config), "--dataset", str(answer_set)]
    assert main([*argv, "--budgets", "20000", "--log-dir", str(tmp_path), "--json", str(out)]) == 0
    run = read_answers_json(out)
    row = run["runs"][0]["row"]
    assert (row["mode"], row["answered"], row["questions"], row["models"]) == (
        None,
        2,
        2,
        ["null"],
    )
    # The null backend's filler (8 words) runs to its token cap, which no budget asked for.
    assert row["loops"] == 1.0 and row["answer_modes"] == {"generate": 2}
    assert minilm_api_key not in out.read_text()
