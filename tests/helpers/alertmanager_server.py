"""A real Alertmanager for tests: Debian's ``prometheus-alertmanager`` (``make alert-tools``
installs it), started on a free port of 127.0.0.1 with the config a test gives it, its storage in
a temporary directory and its cluster gossip off; stopped when the block ends.

``AlertmanagerServer.alerts`` asks it what it holds, as ``amtool alert query`` does, over
``/api/v2/alerts``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.helpers.ports import free_port
from tests.helpers.processes import ServerProcess, installed, stop, wait_answering

#: Debian's name for the binary (upstream's is ``alertmanager``).
NAMES = ("prometheus-alertmanager", "alertmanager")


def alertmanager_path() -> str | None:
    """The Alertmanager binary, or None where it is not installed."""
    return installed(*NAMES)


class AlertmanagerServer(ServerProcess):
    """A running Alertmanager: its URL and its log."""

    def alerts(self) -> list[dict[str, Any]]:
        """The alerts it holds now (active, silenced or inhibited), as its API gives them."""
        response = httpx.get(f"{self.url}/api/v2/alerts", timeout=10)
        response.raise_for_status()
        alerts = response.json()
        assert isinstance(alerts, list), alerts
        return alerts


@contextmanager
def alertmanager_serving(workdir: Path, config: Mapping[str, Any]) -> Iterator[AlertmanagerServer]:
    """Alertmanager running ``config`` (an alertmanager.yml as a mapping) for the block."""
    binary = alertmanager_path()
    assert binary is not None, "Alertmanager is not installed (make alert-tools installs it)"
    workdir.mkdir(parents=True, exist_ok=True)
    config_file = workdir / "alertmanager.yml"
    config_file.write_text(yaml.safe_dump(dict(config), sort_keys=False))
    port = free_port()
    args = [binary, f"--config.file={config_file}", f"--storage.path={workdir / 'data'}"]
    args += [f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="]
    args += ["--log.level=warn"]
    log = workdir / "alertmanager.log"
    with log.open("wb") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=workdir)
    server = AlertmanagerServer(f"http://127.0.0.1:{port}", log, process)
    try:
        wait_answering(f"{server.url}/-/ready", process, server.log_tail, what="alertmanager")
        yield server
    finally:
        stop(process)
