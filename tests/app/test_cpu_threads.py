"""The CPU a process may use, and how the offline default's llama.cpp threads are sized from it
(issue 56: two busy neighbours turned a 30 s budget into 504s)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.pipeline.services import default_backend
from app.settings import Settings, usable_cores
from app.settings import serve as serve_settings
from app.settings.serve import cgroup_cpu_quota
from inference import LlamaCppBackend


def cgroup_tree(root: Path, limits: dict[str, str]) -> Path:
    """A cgroup v2 tree under ``root`` with ``cpu.max`` files, and the membership file of a
    process in its deepest group."""
    deepest = ""
    for group, limit in limits.items():
        folder = root / group
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "cpu.max").write_text(limit + "\n")
        deepest = max(deepest, group, key=len)
    membership = root / "self-cgroup"
    membership.write_text(f"0::/{deepest}\n")
    return membership


def test_a_quota_limits_the_cores_and_the_tightest_group_wins(tmp_path: Path) -> None:
    membership = cgroup_tree(
        tmp_path, {"": "max 100000", "pod": "150000 100000", "pod/app": "max 100000"}
    )
    assert cgroup_cpu_quota(tmp_path, membership) == 1.5
    membership = cgroup_tree(tmp_path, {"pod": "150000 100000", "pod/app": "50000 100000"})
    assert cgroup_cpu_quota(tmp_path, membership) == 0.5


@pytest.mark.parametrize("line", ["0::/", "12:cpu,cpuacct:/docker/abc", ""])
def test_no_quota_where_none_is_set_or_none_can_be_read(tmp_path: Path, line: str) -> None:
    (tmp_path / "cpu.max").write_text("max 100000\n")
    membership = tmp_path / "self-cgroup"
    membership.write_text(line)
    assert cgroup_cpu_quota(tmp_path, membership) is None
    assert cgroup_cpu_quota(tmp_path / "missing", tmp_path / "missing") is None


@pytest.mark.parametrize(("quota", "fewest"), [(0.5, 1), (1.5, 2), (None, 64)])
def test_the_usable_cores_are_the_affinity_cut_to_the_quota(
    monkeypatch: pytest.MonkeyPatch, quota: float | None, fewest: int
) -> None:
    monkeypatch.setattr(serve_settings, "cgroup_cpu_quota", lambda root: quota)
    monkeypatch.setattr(serve_settings.os, "sched_getaffinity", lambda pid: set(range(64)))
    assert usable_cores() == fewest


def test_the_offline_default_decodes_on_one_thread_and_prompts_on_the_usable_cores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = default_backend(Settings(_env_file=None, data_dir=tmp_path))
    assert isinstance(backend, LlamaCppBackend)
    assert (backend.n_threads, backend.prompt_threads) == (1, usable_cores())
    monkeypatch.setenv("RAGTIME_GENERATION_THREADS", "2")
    monkeypatch.setenv("RAGTIME_GENERATION_PROMPT_THREADS", "3")
    backend = default_backend(Settings(_env_file=None, data_dir=tmp_path))
    assert isinstance(backend, LlamaCppBackend)
    assert (backend.n_threads, backend.prompt_threads) == (2, 3)
