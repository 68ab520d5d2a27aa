"""docker-compose.yml read as data: its services, and helpers over compose's short and long
syntaxes (environment, ports, bind mounts, commands, addresses), for the tests that check the
stack against the code and the configs it mounts (tests/test_compose.py, tests/test_grafana.py).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"


def compose_services() -> dict[str, dict[str, Any]]:
    """The compose file's ``services``, by name."""
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(data, dict) and isinstance(data.get("services"), dict)
    return data["services"]


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.partition("=")[::2] for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def container_ports(service: dict[str, Any]) -> set[int]:
    """The container side of ``ports`` and ``expose``."""
    ports: set[int] = set()
    for entry in [*(service.get("ports") or []), *(service.get("expose") or [])]:
        if isinstance(entry, dict):
            ports.add(int(entry["target"]))
        else:
            ports.add(int(str(entry).split("/")[0].rsplit(":", 1)[-1]))
    return ports


def bind_mounts(service: dict[str, Any]) -> list[tuple[str, str]]:
    """``(host source, container target)`` of each bind mount (named volumes left out)."""
    return [(source, target) for source, target, _ in bind_mounts_with_modes(service)]


def bind_mounts_with_modes(service: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """``(host source, container target, read only)`` of each bind mount."""
    mounts = []
    for entry in service.get("volumes") or []:
        if isinstance(entry, dict):
            if entry.get("type") == "bind":
                mounts.append((entry["source"], entry["target"], bool(entry.get("read_only"))))
            continue
        source, _, rest = str(entry).partition(":")
        target, _, mode = rest.partition(":")
        if source.startswith((".", "/", "~", "$")):
            mounts.append((source, target, "ro" in mode.split(",")))
    return mounts


def command(service: dict[str, Any]) -> list[str]:
    cmd = service.get("command") or []
    return shlex.split(cmd) if isinstance(cmd, str) else [str(part) for part in cmd]


def flag_value(args: list[str], flag: str) -> str:
    for i, arg in enumerate(args):
        if arg == flag:
            return args[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    raise AssertionError(f"{flag} not in {args}")


def host_port(address: str) -> tuple[str, int]:
    parts = urlsplit(address if "//" in address else f"//{address}")
    assert parts.hostname and parts.port, f"no host:port in {address!r}"
    return parts.hostname, parts.port


def healthcheck_text(service: dict[str, Any]) -> str:
    test = service["healthcheck"]["test"]
    return test if isinstance(test, str) else " ".join(test)
