"""`ragtime serve` as a process, `ragtime ask` as its client, spans exported over OTLP/HTTP."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.otlp_receiver import OtlpReceiver
from tests.helpers.ports import free_port
from tests.helpers.processes import wait_ready

pytestmark = pytest.mark.slow


def test_served_answers_and_otlp_export(minilm_data_dir: Path, minilm_api_key: str) -> None:
    port = free_port()
    with OtlpReceiver() as receiver:
        env = {
            **os.environ,
            "RAGTIME_DATA_DIR": str(minilm_data_dir),
            "RAGTIME_MAX_OUTPUT_TOKENS": "24",
            # Every stage's span, generate's too (the CPU default answers from the passages).
            "RAGTIME_ANSWER_MODE": "generate",
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_SERVICE_NAME": "ragtime-under-test",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        }
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "app.cli",
                "serve",
                "--port",
                str(port),
                "--log-level",
                "warning",
            ],
            env=env,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            wait_ready(url, server)
            asked = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "app.cli",
                    "ask",
                    "--url",
                    url,
                    "--key",
                    minilm_api_key,
                    "What does the pass statement do?",
                ],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert asked.returncode == 0, asked.stderr
            assert "tutorial/controlflow.rst.txt" in asked.stdout
            assert "trace " in asked.stdout
            trace_id = asked.stdout.split("trace ", 1)[1].split()[0]
            denied = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "app.cli",
                    "ask",
                    "--url",
                    url,
                    "--key",
                    "rt_wrong",
                    "hi",
                ],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert denied.returncode == 1 and "error 401" in denied.stderr
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=30)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(
            s["trace_id"] == trace_id and s["name"] == "POST /v1/ask" for s in receiver.spans
        ):
            time.sleep(0.1)
    spans = [s for s in receiver.spans if s["trace_id"] == trace_id]
    assert spans and all(s["path"] == "/v1/traces" for s in spans)
    root = next(s for s in spans if s["name"] == "POST /v1/ask")
    assert root["resource"]["service.name"] == "ragtime-under-test"
    assert root["attributes"]["ragtime.budget.exceeded"] is False
    stages = {s["name"]: s for s in spans if s["parent_span_id"] == root["span_id"]}
    assert {"auth", "embed", "search", "rerank", "assemble", "generate"} <= set(stages)
    assert stages["generate"]["attributes"]["gen_ai.usage.output_tokens"] > 0


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def listening_pids(port: int) -> list[int]:
    """The processes holding a socket that listens on ``port`` (Linux /proc), one entry per
    socket."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[1].endswith(f":{port:04X}") and fields[3] == "0A":  # 0A: LISTEN
                inodes.add(fields[9])
    holders = []
    for fd in Path("/proc").glob("[0-9]*/fd/*"):
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            holders.append(int(fd.parent.parent.name))
    return holders


ASKED = re.compile(r'^ragtime_requests_total\{route="/v1/ask",status="200"\} (\S+)$', re.M)
FROZEN_PIDS = re.compile(r'^ragtime_heap_frozen_objects\{pid="(\d+)"\} (\S+)$', re.M)


def test_two_workers_serve_one_port(
    minilm_data_dir: Path, minilm_api_key: str, tmp_path: Path
) -> None:
    """``serve --workers 2``: two processes, each with its own app, answer on one port, each
    listening on a socket of its own (the supervisor on none: ``app.frontdoor.listeners``), and
    ``/metrics``, whichever process takes the scrape, counts both; each process's admission
    knows what its sibling learned (``tracing.budget.door.peers``); their metrics' and
    figures' directories are gone after the stop."""
    port = free_port()
    env = {
        **os.environ,
        "RAGTIME_DATA_DIR": str(minilm_data_dir),
        "RAGTIME_GENERATION_BACKEND": "null",
        "OTEL_TRACES_EXPORTER": "none",
        "TMPDIR": str(tmp_path),
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    server = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--workers", "2"],
        env=env,
    )
    asked = 8
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, server)
        deadline = time.monotonic() + 120
        while len(listening := listening_pids(port)) < 2:  # each, once its app has started
            assert time.monotonic() < deadline, listening
            time.sleep(0.2)
        workers = children_of(server.pid)
        assert len(workers) >= 2
        assert len(listening) == 2 and set(listening) <= set(workers), (listening, workers)
        assert list(tmp_path.glob("ragtime-metrics-*")), "no shared metrics directory"
        assert list(tmp_path.glob("ragtime-admission-*")), "no shared admission directory"
        headers = {"Authorization": f"Bearer {minilm_api_key}"}
        for _ in range(asked):
            # A new connection each time, so that the kernel may hand it to either process.
            response = httpx.post(
                f"{url}/v1/ask",
                json={"question": "What does the pass statement do?"},
                headers=headers,
                timeout=60,
            )
            assert response.status_code == 200, response.text
            assert response.json()["answer"]
        for _ in range(6):
            text = httpx.get(f"{url}/metrics", timeout=10).text
            assert [float(v) for v in ASKED.findall(text)] == [asked], text[:2000]
            frozen = {pid: float(n) for pid, n in FROZEN_PIDS.findall(text)}
            assert len(frozen) == 2 and min(frozen.values()) > 0, frozen
        with httpx.Client(headers=headers, timeout=60) as one_connection:  # one process
            for _ in range(4):
                asked_again = one_connection.post(
                    f"{url}/v1/ask", json={"question": "What is a tuple?"}
                )
                assert asked_again.status_code == 200, asked_again.text
        books = admission_books(url, headers)
        assert len(books) == 2, books
        served, other = sorted(books.values(), key=lambda book: -len(book["learned"]["alone_ms"]))
        assert "/v1/ask" in served["learned"]["alone_ms"], served
        # Each process's siblings' figures are the other's own (the median of one).
        assert other["siblings"] == served["learned"], books
        assert served["siblings"] == other["learned"], books
        assert served["processes"] == other["processes"] == 2
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=60)
    assert not list(tmp_path.glob("ragtime-metrics-*")), "the metrics directory was left"
    assert not list(tmp_path.glob("ragtime-admission-*")), "the admission directory was left"


def admission_books(url: str, headers: dict[str, str]) -> dict[int, dict[str, Any]]:
    """Each process's admission figures (``GET /v1/budget/model``), by pid: a new connection
    for each look, so that the kernel hands some to each process."""
    time.sleep(0.3)  # READ_S: what a process read of its siblings before is stale by now
    books: dict[int, dict[str, Any]] = {}
    for _ in range(40):
        model = httpx.get(f"{url}/v1/budget/model", headers=headers, timeout=10).json()
        books[model["admission"]["pid"]] = model["admission"]
        if len(books) == 2:
            break
    return books


def test_shutdown_with_the_collector_down_is_quick(
    minilm_data_dir: Path, minilm_api_key: str
) -> None:
    """With spans queued for a collector that is not there, SIGINT ends the server within a
    few seconds (it took 10 s idle and 32 s after load)."""
    port = free_port()
    env = {
        **os.environ,
        "RAGTIME_DATA_DIR": str(minilm_data_dir),
        "RAGTIME_GENERATION_BACKEND": "null",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}",  # nobody listens
    }
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app.cli",
            "serve",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        env=env,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, server)
        headers = {"Authorization": f"Bearer {minilm_api_key}"}
        for _ in range(20):
            response = httpx.post(
                f"{url}/v1/ask", json={"question": "What is a tuple?"}, headers=headers, timeout=60
            )
            assert response.status_code == 200, response.text
    finally:
        started = time.monotonic()
        server.send_signal(signal.SIGINT)
        server.wait(timeout=60)
        took = time.monotonic() - started
    assert took < 6.0, f"shutdown took {took:.1f} s"
