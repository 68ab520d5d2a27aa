"""``python -m tests.helpers.readyz URL``: wait until ``URL/readyz`` answers (up to 5 minutes),
then print its status and JSON body as one JSON object, ``{"status": ..., "body": ...}``."""

from __future__ import annotations

import json
import sys
import time

import httpx


def main(url: str, timeout_s: float = 300.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            response = httpx.get(f"{url}/readyz", timeout=2.0)
        except httpx.TransportError:
            time.sleep(0.3)
            continue
        print(json.dumps({"status": response.status_code, "body": response.json()}))
        return 0
    print(json.dumps({"status": 0, "body": "never answered"}))
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
