"""The ``ragtime`` command: serve, ingest, keys, ask, bench, and the demo set-up."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from app.config import get_settings

DEMO_CORPUS = Path(__file__).resolve().parent.parent / "demo" / "corpus"


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve on uvloop and httptools. With several workers, uvicorn starts that many processes
    on one socket, each building its own app from the environment."""
    import uvicorn

    from app.main import create_app
    from tracing import shutdown_tracing

    settings = get_settings()
    host = args.host or settings.host
    port = args.port or int(os.environ.get("PORT", settings.port))
    workers = args.workers or settings.workers
    fast = {"loop": "uvloop", "http": "httptools", "log_level": args.log_level}
    try:
        if workers > 1:
            uvicorn.run(
                "app.main:create_app", factory=True, host=host, port=port, workers=workers, **fast
            )
        else:
            uvicorn.run(create_app(settings), host=host, port=port, **fast)
    finally:
        shutdown_tracing()
    return 0


def _ingest(path: Path, collection: str, *, rebuild: bool = False) -> int:
    from app.services import default_embedder
    from retrieval import DocumentStore, EmbeddingMismatch, ingest_path

    settings = get_settings()
    embedder = default_embedder(settings)
    embedder.load()
    store = DocumentStore(
        settings.store_path,
        embedding_backend=embedder.backend,
        embedding_model=embedder.model_name,
    )
    store.open()
    try:
        if rebuild:
            removed = store.drop_collection(collection)
            print(f"dropped {collection!r} ({removed} chunk(s)) to rebuild it", file=sys.stderr)
        report = ingest_path(
            path,
            collection=collection,
            embedder=embedder,
            store=store,
            progress=lambda name: print(f"  {name}", file=sys.stderr),
        )
    except EmbeddingMismatch as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        store.close()
    print(
        f"ingested {report.files} file(s), {report.chunks} chunk(s) into {collection!r}"
        + (f"; skipped {len(report.skipped)} unsupported" if report.skipped else "")
    )
    for source, reason in report.failures:
        print(f"failed: {source}: {reason}", file=sys.stderr)
    return 1 if report.failures and not report.files else 0


def cmd_ingest(args: argparse.Namespace) -> int:
    path = Path(args.path)
    if not path.exists():
        print(f"error: {path} does not exist", file=sys.stderr)
        return 2
    collection = args.collection or get_settings().default_collection
    return _ingest(path, collection, rebuild=args.rebuild)


def cmd_keys(args: argparse.Namespace) -> int:
    from app.auth import KeyStore

    keys = KeyStore(get_settings().keys_path)
    try:
        if args.keys_command == "create":
            key, secret = keys.create(args.name)
            print(secret)
            print(f"created key {key.id} ({key.name}); it is shown only once", file=sys.stderr)
        elif args.keys_command == "list":
            for key in keys.list():
                state = "active" if key.active else f"revoked {key.revoked_at}"
                print(f"{key.id}\t{key.name}\t{key.hint}\t{key.created_at}\t{state}")
        elif args.keys_command == "revoke":
            if not keys.revoke(args.id):
                print(f"error: no active key with id {args.id}", file=sys.stderr)
                return 1
            print(f"revoked key {args.id}")
    finally:
        keys.close()
    return 0


def cmd_setup_demo(args: argparse.Namespace) -> int:
    """First run only: ingest the demo corpus and create the demo API key. A demo collection
    embedded by a backend whose vectors differ from the configured one's is rebuilt, when it
    holds the demo corpus alone."""
    from app.auth import KeyStore
    from app.services import default_embedder
    from retrieval import DocumentStore, iter_documents

    settings = get_settings()
    name = settings.default_collection
    store = DocumentStore(settings.store_path, embedding_backend=default_embedder(settings).backend)
    store.open()
    has_demo, serves, sources = store.has_collection(name), store.serves(name), store.sources(name)
    built_with = store.embedding_backend_of(name)
    store.close()
    rebuild = has_demo and not serves
    if rebuild:
        demo_sources = {f.relative_to(DEMO_CORPUS).as_posix() for f in iter_documents(DEMO_CORPUS)}
        if not set(sources) <= demo_sources:
            print(
                f"warning: collection {name!r} was embedded with {built_with!r} and holds more "
                f"than the demo corpus: rebuild it with `ragtime ingest PATH --collection {name} "
                "--rebuild`, or searches of it will be refused",
                file=sys.stderr,
            )
            rebuild = False
    if not has_demo or rebuild:
        print(f"ingesting the demo corpus from {DEMO_CORPUS} ...", file=sys.stderr)
        status = _ingest(DEMO_CORPUS, name, rebuild=rebuild)
        if status:
            return status
    key_file = settings.demo_key_path
    if not key_file.exists():
        keys = KeyStore(settings.keys_path)
        _, secret = keys.create("demo")
        keys.close()
        key_file.write_text(secret + "\n")
        key_file.chmod(0o600)
        print(f"demo API key (also in {key_file}): {secret}")
    else:
        print(f"demo API key is in {key_file}")
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    import httpx

    settings = get_settings()
    key = args.key or os.environ.get("RAGTIME_API_KEY")
    if not key and settings.demo_key_path.exists():
        key = settings.demo_key_path.read_text().strip()
    if not key:
        print("error: no API key: pass --key or set RAGTIME_API_KEY", file=sys.stderr)
        return 2
    url = args.url or f"http://{settings.host}:{os.environ.get('PORT', settings.port)}"
    payload: dict[str, object] = {"question": args.question, "stream": True}
    for name in ("collection", "top_k", "budget_ms"):
        if getattr(args, name) is not None:
            payload[name] = getattr(args, name)
    headers = {"Authorization": f"Bearer {key}"}
    with (
        httpx.Client(timeout=httpx.Timeout(10.0, read=300.0)) as client,
        client.stream("POST", f"{url}/v1/ask", json=payload, headers=headers) as response,
    ):
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
                elif event == "done":
                    _print_report(data)
                elif event == "error":
                    print(f"\nerror: {data['error']['message']}", file=sys.stderr)
                    return 1
    return 0


def _print_report(report: dict[str, object]) -> None:
    print("\n")
    for c in report["citations"]:  # type: ignore[attr-defined]
        mark = {"model": "*", "attributed": "~"}.get(c.get("by") or "", " ")
        print(f"{mark}[{c['label']}] {c['source']} — {c['section'] or c['title']}")
    print(f"citations: {report.get('attribution')}  grounded: {report.get('grounded')}")
    budget = report["budget"]
    print(
        f"trace {report['trace_id']}  spent {budget['spent_ms']:.0f} of "  # type: ignore[index]
        f"{budget['budget_ms']:.0f} ms  timings {report['timings_ms']}"  # type: ignore[index]
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ragtime", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the HTTP service")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--log-level", default="info")
    serve.add_argument("--workers", type=int, help="server processes (default RAGTIME_WORKERS, 1)")
    serve.set_defaults(func=cmd_serve)

    ingest = sub.add_parser("ingest", help="ingest a file or directory (re-ingest replaces)")
    ingest.add_argument("path")
    ingest.add_argument("--collection")
    ingest.add_argument(
        "--rebuild",
        action="store_true",
        help="drop the collection (every source) first: how to change its embedding backend",
    )
    ingest.set_defaults(func=cmd_ingest)

    keys = sub.add_parser("keys", help="manage API keys")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="create a key and print it once")
    create.add_argument("name")
    keys_sub.add_parser("list", help="list keys (never their secrets)")
    revoke = keys_sub.add_parser("revoke", help="revoke a key by id")
    revoke.add_argument("id", type=int)
    keys.set_defaults(func=cmd_keys)

    ask = sub.add_parser("ask", help="ask the running server a question")
    ask.add_argument("question")
    ask.add_argument("--url")
    ask.add_argument("--key")
    ask.add_argument("--collection")
    ask.add_argument("--top-k", dest="top_k", type=int)
    ask.add_argument("--budget-ms", dest="budget_ms", type=int)
    ask.set_defaults(func=cmd_ask)

    demo = sub.add_parser("setup-demo", help="ingest the demo corpus and make a demo key (once)")
    demo.set_defaults(func=cmd_setup_demo)

    _register_bench(sub)
    return parser


BENCH_MISSING = (
    "ragtime bench needs the load harness and its extra: "
    "pip install -e '.[bench]' (from a checkout of ragtime)"
)


def cmd_bench_missing(args: argparse.Namespace) -> int:
    print(f"error: {BENCH_MISSING}", file=sys.stderr)
    return 2


def _register_bench(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``ragtime bench`` from the top-level ``bench`` package, which the service does not ship."""
    try:
        from bench.cli import register
    except ImportError:
        missing = sub.add_parser(
            "bench", help="load runs and benchmarks (needs [bench])", add_help=False
        )
        missing.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        missing.set_defaults(func=cmd_bench_missing)
        return
    register(sub)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    parser = build_parser()
    # parse_args, except that without the bench extra ``ragtime bench ...`` takes any arguments.
    args, unknown = parser.parse_known_args(argv)
    if unknown and args.func is not cmd_bench_missing:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    args.argv = list(sys.argv[1:] if argv is None else argv)  # as typed, for bench records
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
