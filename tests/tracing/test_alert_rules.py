"""The Prometheus and Alertmanager configs under deploy/: valid, and the rules' own unit tests.

promtool and amtool come from Debian's prometheus and prometheus-alertmanager packages, which
``make test`` installs where they are missing. Without them a test is skipped locally and fails
in CI (where ``CI`` is set).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.process

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def run_tool(tool: str, *args: str) -> str:
    if shutil.which(tool) is None:
        message = f"{tool} is not installed (Debian: `make alert-tools` installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    result = subprocess.run(
        [tool, *args], cwd=DEPLOY, capture_output=True, text=True, timeout=120, check=False
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{tool} {' '.join(args)} failed:\n{output}"
    return output


def test_alert_rules_are_valid() -> None:
    output = run_tool("promtool", "check", "rules", "prometheus/alerts.yml")
    assert "SUCCESS: 5 rules found" in output


def test_alert_rules_pass_their_unit_tests() -> None:
    run_tool("promtool", "test", "rules", "prometheus/alerts_test.yml")


def test_prometheus_config_is_valid() -> None:
    run_tool("promtool", "check", "config", "prometheus/prometheus.yml")


def test_alertmanager_config_is_valid() -> None:
    output = run_tool("amtool", "check-config", "alertmanager/alertmanager.yml")
    assert "1 receivers" in output
