"""The ``ragtime`` command: serve, ingest, keys, ask, bench, and the demo set-up."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli.ask import register_ask
from app.cli.evaluation import register_eval
from app.cli.failures import CliError, at, one_line, writable_dir
from app.cli.parsing import EXIT_STATUSES, RagtimeParser
from app.cli.reranker import register_reranker
from app.keys.auth import SCOPES
from app.settings import get_settings

if TYPE_CHECKING:
    from app.keys.auth import BaseKeyStore

DEMO_CORPUS = Path(__file__).resolve().parents[2] / "demo" / "corpus"
DESCRIPTION = (
    "Retrieval-augmented question answering that keeps time: serve it, ingest documents, "
    "manage API keys, ask the running server, evaluate and benchmark."
)


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve on uvloop and httptools. With several workers, our supervisor starts that many
    processes (``app.frontdoor.workers``), each building its own app from the environment,
    their metrics in one directory."""
    import uvicorn

    from app.frontdoor.protocol import AdmittingProtocol
    from app.frontdoor.run import serve
    from app.main import create_app
    from tracing import shutdown_tracing
    from tracing.budget.door import peers
    from tracing.metrics import shared_metrics_dir

    settings = get_settings()
    host = args.host or settings.host
    port = args.port or int(os.environ.get("PORT", settings.port))
    workers = args.workers or settings.serve_workers
    # uvloop, and httptools deciding admission as it parses (app.frontdoor.protocol); what is
    # still open after the shutdown's grace gets a second to close (app.frontdoor.server).
    options: dict[str, Any] = {
        "loop": "uvloop",
        "http": AdmittingProtocol,
        "log_level": args.log_level,
        "timeout_graceful_shutdown": 1,
    }
    if workers > 1:
        config = uvicorn.Config(
            "app.main:create_app", factory=True, host=host, port=port, workers=workers, **options
        )
    else:
        config = uvicorn.Config(create_app(settings), host=host, port=port, **options)
    try:
        # /metrics answers for every process; each process's admission starts from what its
        # siblings learned.
        with shared_metrics_dir(workers), peers.shared_dir(workers):
            status = serve(config)
    finally:
        shutdown_tracing()
    return status


def _ingest(path: Path, collection: str, *, rebuild: bool = False) -> int:
    from app.cli.ingest_progress import ProgressPrinter
    from app.http.uploads import parse_limits
    from app.pipeline.services import default_embedders, default_store
    from retrieval import ingest_path

    settings = get_settings()
    writable_dir(settings.store_path, "the index")
    embedders = default_embedders(settings)
    store = default_store(settings, embedders.default)
    with at(settings.store_path, "open the index in"):
        store.open()
    try:
        # An existing collection keeps the backend that built it; a rebuild takes the
        # configured one (how a collection switches backend).
        embedder = embedders.default if rebuild else embedders.for_collection(store, collection)
        embedder.load()
        if rebuild:
            print(f"rebuilding {collection!r} from nothing, in a new snapshot", file=sys.stderr)
        printer = ProgressPrinter(sys.stderr)
        with at(settings.store_path, "write the index in"), printer.finally_last():
            report = ingest_path(
                path,
                collection=collection,
                embedder=embedder,
                store=store,
                rebuild=rebuild,
                on_progress=printer,
                chunk_tokens=settings.chunk_tokens,
                overlap_tokens=settings.chunk_overlap_tokens,
                limits=parse_limits(settings),
            )
    finally:
        store.close()
    published = f"published snapshot {report.snapshot}" if report.snapshot else "nothing changed"
    print(
        f"ingested {report.files} file(s), {report.chunks} chunk(s) into {collection!r}"
        + (f" and {len(report.attachments)} attachment(s)" if report.attachments else "")
        + (f"; skipped {len(report.skipped)} unsupported" if report.skipped else "")
        + (f"; {report.duplicates} duplicate chunk(s) stored once" if report.duplicates else "")
        + (f"; {len(report.copies)} file(s) recorded as copies" if report.copies else "")
        + f"; files: {report.summary()}; {published}"
    )
    for source, original in report.copies:
        print(f"copy: {source}: the same bytes as {original}, searchable as both", file=sys.stderr)
    for source, reason in report.failures:
        print(f"failed: {source}: {reason}", file=sys.stderr)
    stored = report.files or report.attachments or report.unchanged or report.copies
    return 1 if report.failures and not stored else 0


def cmd_ingest(args: argparse.Namespace) -> int:
    from retrieval import require_documents

    path = Path(args.path)
    if not path.exists():
        raise CliError(f"{path} does not exist")
    require_documents(path)  # an empty folder is an error, before anything is made
    collection = args.collection or get_settings().default_collection
    return _ingest(path, collection, rebuild=args.rebuild)


def cmd_keys(args: argparse.Namespace) -> int:
    from app.keys.auth import KeyStoreUnavailable
    from app.keys.stores import open_key_store

    settings = get_settings()
    path = settings.keys_path
    if settings.database_url is None:  # SQLite in the data dir: check it before opening
        if args.keys_command != "list":
            writable_dir(path.parent, "the key store")
        elif path.parent.exists() and not path.parent.is_dir():
            raise CliError(f"cannot read the key store in {path.parent}: it is not a directory")
    with at(path, "open the key store at"):
        keys = open_key_store(settings)
    try:
        with at(path, "use the key store at"):
            return _keys_command(keys, args)
    except KeyStoreUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        keys.close()


def _keys_command(keys: BaseKeyStore, args: argparse.Namespace) -> int:
    if args.keys_command == "create":
        try:
            key, secret = keys.create(
                args.name, scopes=args.scope or ("ask",), collections=args.collection
            )
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(secret)
        print(
            f"created key {key.id} ({key.name}, {key.describe()}); it is shown only once",
            file=sys.stderr,
        )
    elif args.keys_command == "list":
        for key in keys.list():
            state = "active" if key.active else f"revoked {key.revoked_at}"
            print(f"{key.id}\t{key.name}\t{key.hint}\t{key.created_at}\t{state}\t" + key.describe())
    elif args.keys_command == "revoke":
        if not keys.revoke(args.id):
            print(f"error: no active key with id {args.id}", file=sys.stderr)
            return 1
        print(f"revoked key {args.id}")
    return 0


def cmd_setup_demo(args: argparse.Namespace) -> int:
    """First run only: ingest the demo corpus and create the demo API key. A demo collection
    that exists is kept, whatever backend built it (it is searched with its own)."""
    from app.keys.stores import open_key_store
    from app.pipeline.services import default_embedder, default_store

    settings = get_settings()
    writable_dir(settings.data_dir, "the demo set-up")
    name = settings.default_collection
    store = default_store(settings, default_embedder(settings))
    with at(settings.store_path, "open the index in"):
        store.open()
    has_demo = store.has_collection(name)
    store.close()
    if not has_demo:
        print(f"ingesting the demo corpus from {DEMO_CORPUS} ...", file=sys.stderr)
        status = _ingest(DEMO_CORPUS, name)
        if status:
            return status
    key_file = settings.demo_key_path
    if not key_file.exists():
        with at(settings.keys_path, "create the demo key in"):
            keys = open_key_store(settings)
            _, secret = keys.create("demo", scopes=SCOPES)  # the operator's key: every collection
            keys.close()
        with at(key_file, "write the demo key to"):
            key_file.write_text(secret + "\n")
            key_file.chmod(0o600)
        print(f"demo API key (also in {key_file}): {secret}")
    else:
        print(f"demo API key is in {key_file}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = RagtimeParser(
        prog="ragtime", description=DESCRIPTION, epilog=EXIT_STATUSES
    )
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the HTTP service")
    serve.add_argument("--host", help="the address to listen on (default: RAGTIME_HOST)")
    serve.add_argument(
        "--port", type=int, help="the port to listen on (default: PORT, else RAGTIME_PORT)"
    )
    serve.add_argument(
        "--log-level",
        default="info",
        choices=("critical", "error", "warning", "info", "debug", "trace"),
        help="uvicorn's log level",
    )
    serve.add_argument(
        "--workers", type=int, help="server processes (default: RAGTIME_WORKERS, auto)"
    )
    serve.set_defaults(func=cmd_serve)

    ingest = sub.add_parser("ingest", help="ingest a file or directory (re-ingest replaces)")
    ingest.add_argument(
        "path", help="a file, or a folder: its files of the formats ingest reads, hidden ones not"
    )
    ingest.add_argument(
        "--collection", help="the collection to ingest into (default: RAGTIME_DEFAULT_COLLECTION)"
    )
    ingest.add_argument(
        "--rebuild",
        action="store_true",
        help="drop the collection (every source) first: how to change its embedding backend",
    )
    ingest.set_defaults(func=cmd_ingest)

    keys = sub.add_parser("keys", help="manage API keys")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="create a key and print it once")
    create.add_argument("name", help="what to call the key (shown by `keys list`)")
    create.add_argument(
        "--scope",
        action="append",
        choices=SCOPES,
        help="what the key may do (repeat for several; default: ask)",
    )
    create.add_argument(
        "--collection",
        action="append",
        help="a collection the key may read and ingest into (repeat; default: every one)",
    )
    keys_sub.add_parser("list", help="list keys (never their secrets)")
    revoke = keys_sub.add_parser("revoke", help="revoke a key by id")
    revoke.add_argument("id", type=int, help="the key's id, as `keys list` shows it")
    keys.set_defaults(func=cmd_keys)

    register_ask(sub)

    demo = sub.add_parser("setup-demo", help="ingest the demo corpus and make a demo key (once)")
    demo.set_defaults(func=cmd_setup_demo)

    register_reranker(sub)
    _register_bench(sub)
    register_eval(sub)
    return parser


BENCH_MISSING = (
    "ragtime bench needs the load harness and its extra: "
    "pip install -e '.[bench]' (from a checkout of ragtime)"
)


def cmd_bench_missing(args: argparse.Namespace) -> int:
    print(f"error: {BENCH_MISSING}", file=sys.stderr)
    return 1


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


#: The loggers whose INFO lines the CLI prints: ragtime's own. Every other library says only its
#: warnings: faiss's loader tells at every start how it looked for its AVX builds (a
#: ``ModuleNotFoundError`` among them), httpx every request, and so on.
OWN_LOGGERS = ("ragtime", "app", "retrieval", "inference", "tracing", "bench")


def configure_logging() -> None:
    """Log ragtime's INFO lines and libraries' warnings to stderr, and no library progress
    bars (transformers' "Loading weights" when a model is exported); idempotent."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for name in OWN_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # read as huggingface loads


#: The exit status of a command ended by Ctrl-C (128 + SIGINT, as shells report it).
INTERRUPTED = 130


def main(argv: list[str] | None = None) -> int:
    configure_logging()
    parser = build_parser()
    # parse_args, except that without the bench extra ``ragtime bench ...`` takes any arguments.
    args, unknown = parser.parse_known_args(argv)
    if unknown and args.func is not cmd_bench_missing:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    args.argv = list(sys.argv[1:] if argv is None else argv)  # as typed, for bench records
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        # Ctrl-C: what a command was writing is thrown away (an ingest's staged snapshot: the
        # collection keeps serving its current one), and no traceback.
        print("interrupted", file=sys.stderr)
        return INTERRUPTED
    except Exception as exc:
        line = one_line(exc)
        if line is None:
            raise  # a bug: its traceback is what a report needs
        print(line, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
