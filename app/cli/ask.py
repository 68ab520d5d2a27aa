"""``ragtime ask``: a small streaming client of the running server (``POST /v1/ask``).

It prints the answer's tokens as they come, then its citations, grounding and budget. A server
that cannot be reached is one line naming the URL tried and what to do (``CliError``: exit 1);
a URL that is not http(s) is a command-line mistake (exit 2).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from app.cli.failures import CliError
from app.settings import get_settings

#: How to get a server to ask: the line a refused connection ends with.
START_A_SERVER = "start one with `ragtime serve` (or `make serve`), or point --url at one"


def register_ask(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``ask`` to the ``ragtime`` parser's subparsers."""
    ask = sub.add_parser("ask", help="ask the running server a question")
    ask.add_argument("question", help="the question, in quotes")
    ask.add_argument(
        "--url",
        help="the server's base URL (default: http://RAGTIME_HOST:PORT, from the settings)",
    )
    ask.add_argument(
        "--key",
        help="an API key with the ask scope (default: RAGTIME_API_KEY, else the demo key "
        "in <data_dir>/demo-api-key)",
    )
    ask.add_argument(
        "--collection", help="the collection to search (default: RAGTIME_DEFAULT_COLLECTION)"
    )
    ask.add_argument(
        "--top-k", dest="top_k", type=int, help="passages in the prompt (default: RAGTIME_TOP_K)"
    )
    ask.add_argument(
        "--budget-ms",
        dest="budget_ms",
        type=int,
        help="the request's latency budget (default: RAGTIME_BUDGET_MS_DEFAULT)",
    )
    ask.add_argument(
        "--mode",
        dest="answer_mode",
        choices=("generate", "extract", "auto"),
        help="who writes the answer: the model, the passages' own sentences, or the model with "
        "the passages to fall back on (default: the server's RAGTIME_ANSWER_MODE)",
    )
    ask.set_defaults(func=cmd_ask)


def client_key(given: str | None) -> str:
    """The key a client command sends: ``--key``, else ``RAGTIME_API_KEY``, else the demo key."""
    settings = get_settings()
    key = given or os.environ.get("RAGTIME_API_KEY")
    if not key and settings.demo_key_path.exists():
        key = settings.demo_key_path.read_text().strip()
    if not key:
        raise CliError(
            "no API key: pass --key, set RAGTIME_API_KEY, or run `ragtime setup-demo` once"
        )
    return key


def server_url(given: str | None) -> str:
    """The server a client command asks: ``--url``, else the settings' host and port."""
    settings = get_settings()
    default = f"http://{settings.host}:{os.environ.get('PORT', settings.port)}"
    return (given or default).rstrip("/")


def cmd_ask(args: argparse.Namespace) -> int:
    import httpx

    key = client_key(args.key)
    url = server_url(args.url)
    try:
        scheme = httpx.URL(url).scheme
    except httpx.InvalidURL:
        scheme = ""
    if scheme not in ("http", "https"):
        print(f"error: --url {url!r} is not an http(s) URL", file=sys.stderr)
        return 2
    payload: dict[str, object] = {"question": args.question, "stream": True}
    for name in ("collection", "top_k", "budget_ms", "answer_mode"):
        if getattr(args, name) is not None:
            payload[name] = getattr(args, name)
    headers = {"Authorization": f"Bearer {key}"}
    try:
        with (
            httpx.Client(timeout=httpx.Timeout(10.0, read=300.0)) as client,
            client.stream("POST", f"{url}/v1/ask", json=payload, headers=headers) as response,
        ):
            return _print_stream(response)
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise CliError(
            f"no ragtime server answers at {url} ({connection_reason(exc)}): {START_A_SERVER}"
        ) from exc
    except httpx.TimeoutException as exc:
        raise CliError(f"the server at {url} stopped answering ({connection_reason(exc)})") from exc
    except httpx.TransportError as exc:
        raise CliError(f"the connection to {url} broke: {connection_reason(exc)}") from exc


def connection_reason(exc: BaseException) -> str:
    """What went wrong in a few words: httpx's message (the OS's, for a refused connection)."""
    text = str(exc).strip()
    if "Connection refused" in text:
        return "connection refused"
    return text.splitlines()[-1] if text else type(exc).__name__


#: What the CLI prints where ``auto`` replaced the model's answer with the passages' own.
REPLACED = "[the passages' own answer instead:]"
#: How each attribution method reads (``Report.attribution``).
CITED = {
    "model": "cited by the model (*)",
    "attributed": "cited by attribution (~)",
    "extracted": "quoted from the passages (>)",
    "unattributed": "no passage supports any sentence",
    "skipped": "citations not attributed: no time left",
    "empty": "empty answer",
    "abstained": "nothing cited",
}


def trust_line(report: dict[str, Any]) -> str:
    """Who wrote the answer, whether the passages bear it out, and how its citations were found:
    one line, in the words docs/answers.md defines them by."""
    mode = report.get("answer_mode", "generate")
    if mode == "abstain":
        support = "the documents do not answer this"
    else:
        grounded = report.get("grounded")
        support = (
            "support not judged"
            if grounded is None
            else "supported by the passages"
            if grounded
            else "UNSUPPORTED: the passages do not bear it out"
        )
    cited = CITED.get(str(report.get("attribution")), str(report.get("attribution")))
    return f"written by: {mode}  {support}  {cited}"


def _print_stream(response: Any) -> int:
    """Print a ``/v1/ask`` SSE stream: tokens as they come, then the report."""
    if response.status_code != 200:
        response.read()
        print(f"error {response.status_code}: {response.text}", file=sys.stderr)
        return 1
    event = ""
    for line in response.iter_lines():
        if line.startswith("event:"):
            event = line.split(":", 1)[1].strip()
        elif line.startswith("data:"):
            data = json.loads(line.split(":", 1)[1])
            if event == "token":
                print(data["text"], end="", flush=True)
            elif event == "replace":
                print(f"\n\n{REPLACED}\n{data['text']}", end="", flush=True)
            elif event == "done":
                _print_report(data)
            elif event == "error":
                print(f"\nerror: {data['error']['message']}", file=sys.stderr)
                return 1
    return 0


def _print_report(report: dict[str, Any]) -> None:
    print("\n")
    for c in report["citations"]:
        mark = {"model": "*", "attributed": "~", "extracted": ">"}.get(c.get("by") or "", " ")
        print(f"{mark}[{c['label']}] {c['source']} — {c['section'] or c['title']}")
    print(trust_line(report))
    budget = report["budget"]
    print(
        f"trace {report['trace_id']}  spent {budget['spent_ms']:.0f} of "
        f"{budget['budget_ms']:.0f} ms  timings {report['timings_ms']}"
    )
