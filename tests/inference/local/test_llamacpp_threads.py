"""llama.cpp's OpenMP threads wait passively: a thread that reaches a barrier while the one it
waits for is descheduled sleeps instead of spinning away its time slice (issue 56). The policy
is read once, when OpenMP's library loads with ``llama_cpp``, so each case is a fresh process;
``OMP_DISPLAY_ENV=VERBOSE`` makes GNU OpenMP print what it read (a spin count of 0 is the
passive policy; its own default spins 300,000 times)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.process

THROUGH_RAGTIME = (
    "from inference.local.llamacpp_threads import import_llama_cpp; import_llama_cpp()"
)


def openmp_settings(code: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**clean, "OMP_DISPLAY_ENV": "VERBOSE", **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stderr


def test_llama_cpp_loads_with_openmp_waiting_passively() -> None:
    shown = openmp_settings(THROUGH_RAGTIME)
    assert "OMP_WAIT_POLICY = 'PASSIVE'" in shown and "GOMP_SPINCOUNT = '0'" in shown


def test_imported_directly_openmp_would_spin() -> None:
    """The case the function exists for: without it, OpenMP's threads spin at barriers."""
    assert "GOMP_SPINCOUNT = '300000'" in openmp_settings("import llama_cpp")


def test_a_policy_the_environment_names_is_kept() -> None:
    shown = openmp_settings(THROUGH_RAGTIME, OMP_WAIT_POLICY="ACTIVE")
    assert "OMP_WAIT_POLICY = 'ACTIVE'" in shown
