"""``ragtime bench``: ``load`` drives servers and records what users feel; ``report`` writes
BENCHMARKS.md from the JSON files of such runs; ``safety`` measures the passage screen and the
redaction on labelled sets."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import logging
import math
import os
import sys
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TypeVar

# The [bench] extra's dependency: without it, ``ragtime bench`` says how to install the extra.
if importlib.util.find_spec("matplotlib") is None:
    raise ImportError("the [bench] extra is not installed (no matplotlib)")

DEMO_QUESTIONS = Path(__file__).resolve().parents[1] / "demo" / "questions.txt"
SECRET_KEYS = ("RAGTIME_API_KEY",)


def register(sub: Any) -> None:
    """Add ``bench`` and its subcommands to the ``ragtime`` parser's subparsers."""
    bench = sub.add_parser("bench", help="load runs and benchmarks (BENCHMARKS.md)")
    bench_sub = bench.add_subparsers(dest="bench_command", required=True)

    load = bench_sub.add_parser(
        "load",
        help="drive servers with streamed questions; report TTFT, ITL, e2e, budget, stages",
        description="Closed loop (--concurrency) or open-loop Poisson arrivals (--rate, --rates) "
        "against --url, or against servers started here from config files (--serve, repeatable) "
        "and the bare FastAPI floor (--floor), taking turns round by round.",
    )
    where = load.add_argument_group("servers")
    where.add_argument("--url", help="a running server (default: RAGTIME_HOST/PORT)")
    where.add_argument("--key", help="API key (default: RAGTIME_API_KEY, or the demo key)")
    where.add_argument(
        "--serve",
        action="append",
        default=[],
        metavar="CONFIG",
        help="start ragtime with the RAGTIME_* variables of CONFIG (.env or JSON)",
    )
    where.add_argument(
        "--fake-sglang",
        metavar="SPEC",
        help="give each --serve config that generates with SGLang a simulated SGLang server "
        "of its own (bench.sglang_sim, an empty prefix cache each), e.g. "
        "'fixed_ms=30,decode_ms_per_token=10,max_running=8,natural_tokens=4'",
    )
    where.add_argument(
        "--floor",
        action="store_true",
        help="add the bare FastAPI/uvicorn streaming endpoint as the baseline",
    )
    where.add_argument(
        "--floor-tokens",
        type=int,
        help="tokens the floor streams (default: the first config's max output)",
    )
    where.add_argument(
        "--log-dir",
        type=Path,
        default=Path("bench-results/logs"),
        help="server logs of --serve and --floor",
    )
    where.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="sample each --serve server with py-spy while it serves, into DIR/<name>.txt",
    )
    how = load.add_argument_group("load")
    how.add_argument(
        "--questions",
        type=Path,
        default=DEMO_QUESTIONS,
        help="one question per line (default: demo/questions.txt)",
    )
    shape = how.add_mutually_exclusive_group()
    shape.add_argument(
        "--concurrency",
        type=_ints,
        metavar="N[,N...]",
        help="closed loop of N users (a list runs each in turn)",
    )
    shape.add_argument("--rate", type=float, help="open loop: Poisson arrivals per second")
    shape.add_argument(
        "--rates",
        type=_floats,
        metavar="R,R,...",
        help="open loops at each rate: TTFT against offered load, and ceilings",
    )
    size = how.add_mutually_exclusive_group()
    size.add_argument("--requests", type=int, help="measured requests per target and load")
    size.add_argument("--duration", type=float, metavar="S", help="measured seconds instead")
    how.add_argument(
        "--min-requests",
        type=int,
        default=0,
        help="with --rates and --duration: at least this many requests per rate",
    )
    how.add_argument(
        "--stop-at-ceiling",
        action="store_true",
        help="with --rates: a target leaves the sweep after two consecutive rates at which "
        "its TTFT p99 doubled",
    )
    how.add_argument("--warmup", type=int, default=2, help="uncounted requests first")
    how.add_argument("--budget-ms", type=int, help="budget_ms sent with every request")
    how.add_argument("--rounds", type=int, help="turns per target (default 1, or 4 with several)")
    how.add_argument("--timeout", type=float, default=120.0, help="per-request limit, seconds")
    how.add_argument("--seed", type=int, default=0, help="seed of the arrival schedule")
    out = load.add_argument_group("output")
    out.add_argument("--json", type=Path, help="write every record and summary here")
    out.add_argument("--plots", type=Path, metavar="DIR", help="write PNG plots here")
    out.add_argument("--no-progress", action="store_true")
    load.set_defaults(func=cmd_load)

    _register_budget(bench_sub)
    _register_quality(bench_sub)
    _register_safety(bench_sub)
    _register_ocr(bench_sub)
    _register_documents(bench_sub)
    _register_retrieval(bench_sub)
    _register_attribution(bench_sub)
    _register_burst(bench_sub)

    report = bench_sub.add_parser("report", help="write BENCHMARKS.md from bench JSON files")
    report.add_argument("--cpu", type=Path, required=True, help="JSON of the CPU default run")
    report.add_argument("--overhead", type=Path, required=True, help="JSON of null vs floor")
    report.add_argument(
        "--ceiling",
        type=Path,
        action="append",
        required=True,
        help="JSON of a rate sweep (repeatable: the null backend's, the floor's)",
    )
    report.add_argument(
        "--budget", type=Path, help="JSON of `ragtime bench budget` (adds its section)"
    )
    report.add_argument(
        "--prefix",
        type=Path,
        help="JSON of the prefix-caching run, prefix-shared vs prefix-naive (adds its section)",
    )
    report.add_argument(
        "--prefix-fake",
        type=Path,
        help="JSON of `bench load --fake-sglang` over the prefix-sim configs",
    )
    report.add_argument(
        "--prefix-states",
        type=Path,
        help="JSON of the repeat-traffic run, prompt states kept vs none (adds a targets row)",
    )
    report.add_argument(
        "--profile",
        type=Path,
        help="py-spy samples of the null-backend server (`bench load --profile`): where the "
        "time of a row that misses its target goes",
    )
    report.add_argument("--out", type=Path, default=Path("BENCHMARKS.md"))
    report.add_argument("--plots", type=Path, default=Path("benchmarks"), metavar="DIR")
    report.add_argument(
        "--setup-command",
        default="ragtime setup-demo",
        help="how the data dir was prepared, as BENCHMARKS.md should show it",
    )
    report.set_defaults(func=cmd_report)

    section = bench_sub.add_parser(
        "section",
        help="write the budget engine's section of BENCHMARKS.md (goodput, quality per saving, "
        "a fresh process's first requests)",
    )
    section.add_argument(
        "--goodput", type=Path, action="append", default=[], help="JSON of a goodput run"
    )
    section.add_argument("--quality", type=Path, help="JSON of `ragtime bench quality`")
    section.add_argument(
        "--fresh",
        type=Path,
        help="JSON of `ragtime bench budget --fresh-starts` (writes its own block; alone, "
        "only that block)",
    )
    section.add_argument(
        "--burst",
        type=Path,
        action="append",
        default=[],
        help="JSON of `ragtime bench burst` (writes the bursts block; alone, only that block)",
    )
    section.add_argument(
        "--burst-before", type=Path, help="JSON of the previous burst run, for its figures"
    )
    section.add_argument("--out", type=Path, default=Path("BENCHMARKS.md"))
    section.set_defaults(func=cmd_section)


def _register_budget(bench_sub: Any) -> None:
    budget = bench_sub.add_parser(
        "budget",
        help="goodput per budget (--budgets), or the policy on and off under injected faults",
        description="With --budgets: for each CONFIG, the unconstrained p50, then for each "
        "budget (multiples of that p50) and load, what share of requests got a useful answer "
        "within budget, and what share a 504, before and after a run of cache hits "
        "(bench.goodput). Without: for each fault (a delay added to every rerank run, or to "
        "every generated token) start two servers from CONFIG, policy on and off, with a tiny "
        "random cross-encoder so that rerank runs; drive them alternately with the same budget "
        "at each load (closed loops of N users). Also measures the budget and tracing "
        "machinery's own cost per request, in-process. With --fresh-starts: each CONFIG's first "
        "requests after a fresh start, N starts each (bench.fresh).",
    )
    budget.add_argument("--serve", type=Path, required=True, metavar="CONFIG", action="append")
    budget.add_argument(
        "--budget-ms", type=int, help="sent with every request (fault and fresh modes)"
    )
    budget.add_argument(
        "--budgets",
        type=_floats,
        metavar="X[,X...]",
        help="goodput mode: budgets as multiples of the unconstrained p50, e.g. 0.3,0.5,1,1.5",
    )
    budget.add_argument("--baseline", type=int, default=8, help="goodput: unconstrained requests")
    budget.add_argument(
        "--cache-hits", type=int, default=50, help="goodput: repeats of one question between"
    )
    budget.add_argument(
        "--repeat-share", type=float, default=0.3, help="goodput: share of repeated questions"
    )
    budget.add_argument(
        "--fake-sglang",
        metavar="SPEC",
        help="goodput: start the simulated SGLang server (bench.sglang_sim) for sglang "
        "configs, e.g. "
        "'fixed_ms=30,prefill_ms_per_token=0.05,decode_ms_per_token=10,max_running=8'",
    )
    budget.add_argument(
        "--fresh-starts",
        type=int,
        metavar="N",
        help="fresh mode: start each CONFIG afresh N times (taking turns) and send each new "
        "process, as soon as it is ready, its first requests one after another with "
        "--budget-ms; useful, 504s and latency per start and in total (bench.fresh)",
    )
    budget.add_argument(
        "--fresh-order",
        type=_ints,
        default=None,
        metavar="Q[,Q...]",
        help="fresh mode: the question numbers (1-based) each new process is asked, in order "
        "(default: 1,2,1,3,4,2,5,6,7,8)",
    )
    budget.add_argument(
        "--rerank-delay-ms", type=float, default=200.0, help="rerank fault per pair (0: not run)"
    )
    budget.add_argument(
        "--token-delay-ms", type=float, default=80.0, help="generation fault per token (0: not run)"
    )
    budget.add_argument("--concurrency", type=_ints, default=[1, 2], metavar="N[,N...]")
    budget.add_argument("--requests", type=int, default=12, help="measured requests per cell")
    budget.add_argument("--warmup", type=int, default=1, help="uncounted requests per cell")
    budget.add_argument("--rounds", type=int, default=2, help="turns per server and load")
    budget.add_argument("--timeout", type=float, default=120.0, help="per-request limit, s")
    budget.add_argument(
        "--questions", type=Path, default=DEMO_QUESTIONS, help="one question per line"
    )
    budget.add_argument(
        "--machinery-iterations",
        type=int,
        default=5000,
        help="requests' worth of machinery timed in-process (0: skip)",
    )
    budget.add_argument(
        "--model-dir",
        type=Path,
        default=Path("bench-results/tiny-cross-encoder"),
        help="where the tiny random cross-encoder is built",
    )
    budget.add_argument("--log-dir", type=Path, default=Path("bench-results/logs"))
    budget.add_argument("--json", type=Path, help="write the result here")
    budget.add_argument("--no-progress", action="store_true")
    budget.set_defaults(func=cmd_budget)

    machinery = bench_sub.add_parser(
        "machinery",
        help="what the budget and tracing machinery costs per request (in-process, no HTTP)",
    )
    machinery.add_argument("--iterations", type=int, default=5000)
    machinery.add_argument("--json", type=Path, help="write the result here")
    machinery.set_defaults(func=cmd_machinery)

    embed = bench_sub.add_parser(
        "embed",
        help="the embedding backends side by side: torch, onnx, onnx-int8 (speed, agreement)",
    )
    add_embed_arguments(embed)
    embed.set_defaults(func=cmd_embed)

    threads = bench_sub.add_parser(
        "embed-threads",
        help="ONNX Runtime's one-thread session against a thread per core, on small batches",
    )
    threads.add_argument("--backend", choices=("onnx", "onnx-int8"), default="onnx-int8")
    threads.add_argument("--sizes", type=_ints, default=[1, 4, 8, 16, 32], help="texts a batch")
    threads.add_argument("--rounds", type=int, default=5, help="timing rounds")
    threads.add_argument("--cache-dir", type=Path, help="ONNX exports (default: the server's)")
    threads.add_argument("--json", type=Path, help="write the result here")
    threads.set_defaults(func=cmd_embed_threads)


def _register_quality(bench_sub: Any) -> None:
    quality = bench_sub.add_parser(
        "quality",
        help="what each saving (smaller context, capped output) costs in answer quality",
        description="In-process on the configured models (RAGTIME_* settings): answers with "
        "the full plan, with smaller contexts (cut and pruned) and cut short, scored by the "
        "reference's content words they keep (bench.quality): each question's own answer with "
        "--python-faq, else the first passage of the configured collection. Writes the curves "
        "the degradation policy weighs its savings with.",
    )
    quality.add_argument("--questions", type=Path, default=DEMO_QUESTIONS)
    quality.add_argument("--limit", type=int, default=12, help="questions used")
    quality.add_argument(
        "--python-faq",
        type=Path,
        metavar="DATA",
        help="measure on the Python FAQ evaluation fetched into DATA (`make eval-data`)",
    )
    quality.add_argument(
        "--work-dir", type=Path, help="its store, as `ragtime eval retrieval` keeps it"
    )
    quality.add_argument(
        "--sample", type=float, default=0.25, help="share of the other documents kept"
    )
    quality.add_argument(
        "--table", type=Path, help="write the QualityTable here (e.g. tracing/budget/quality.json)"
    )
    quality.add_argument("--json", type=Path, help="write the measurement here")
    quality.set_defaults(func=cmd_quality)


def _register_retrieval(bench_sub: Any) -> None:
    retrieval = bench_sub.add_parser(
        "retrieval",
        help="FAISS index types (Flat, HNSW, IVF-PQ) at collection sizes: latency, recall, "
        "build time, memory, ingest throughput",
        description="In-process on synthetic clustered 384-d vectors (bench.retrieval).",
    )
    retrieval.add_argument(
        "--sizes",
        type=_sizes,
        default=[10_000, 100_000, 1_000_000],
        metavar="N[,N...]",
        help="collection sizes, e.g. 10k,100k,1M (default)",
    )
    retrieval.add_argument("--types", type=_names, default=["flat", "hnsw", "ivfpq"])
    retrieval.add_argument("--ef-search", type=_ints, default=[16, 32, 64, 128])
    retrieval.add_argument("--nprobe", type=_ints, default=[8, 32])
    retrieval.add_argument("--queries", type=int, default=200, help="timed one at a time")
    retrieval.add_argument("--clusters", type=int, default=1000)
    retrieval.add_argument(
        "--threads",
        type=int,
        default=1,
        help="FAISS OpenMP threads for building (default 1: on a shared 2-core machine, 2 "
        "threads spin-waited IVF-PQ training on 500 vectors from 2 s to 35 s); searches run on "
        "one thread, as the store's",
    )
    retrieval.add_argument(
        "--index-dir",
        type=Path,
        help="save each built HNSW or IVF-PQ index here, and load it in a later run of the same "
        "size, kind and seed instead of building it again (build figures are kept beside it)",
    )
    retrieval.add_argument("--json", type=Path, help="write the figures here")
    retrieval.set_defaults(func=cmd_retrieval)


def cmd_retrieval(args: argparse.Namespace) -> int:
    from bench.report import write_figures
    from bench.retrieval import run_bench, table

    try:
        result = run_bench(
            args.sizes,
            kinds=args.types,
            ef_search=args.ef_search,
            nprobe=args.nprobe,
            queries=args.queries,
            clusters=args.clusters,
            threads=args.threads,
            index_dir=args.index_dir,
            say=lambda line: print(line, file=sys.stderr, flush=True),
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(table(result))
    if args.json:
        write_figures(result.to_dict(), args.json)
    return 0


def _sizes(text: str) -> list[int]:
    """``10k,100k,1M`` as [10000, 100000, 1000000]."""
    scale = {"k": 1_000, "m": 1_000_000}
    try:
        return [
            int(float(part[:-1]) * scale[part[-1].lower()])
            if part[-1].lower() in scale
            else int(part)
            for part in (p.strip() for p in text.split(","))
        ]
    except (ValueError, IndexError):
        raise argparse.ArgumentTypeError(
            f"not a list of sizes like 10k,100k,1M: {text!r}"
        ) from None


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _register_attribution(bench_sub: Any) -> None:
    attribution = bench_sub.add_parser(
        "attribution",
        help="citation attribution: precision and recall on a labelled set, and the share of "
        "a running server's answers that cite a passage",
        description="Without --url: MiniLM in-process on the labelled sets of "
        "bench/attribution.py (built from the demo corpus), the threshold sweep and the "
        "threshold it chooses. With --url: ask a running server the questions one by one and "
        "count the answers that cite a passage by the model's labels, and at all.",
    )
    attribution.add_argument("--threshold", type=float, help="mark this one (default: shipped)")
    attribution.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    attribution.add_argument("--url", help="a running server, e.g. http://127.0.0.1:8000")
    attribution.add_argument("--key", help="its API key (default: .ragtime/demo-api-key)")
    attribution.add_argument("--questions", type=Path, default=Path("demo/questions.txt"))
    attribution.add_argument("--limit", type=int, default=12, help="questions asked")
    attribution.add_argument("--budget-ms", type=int, help="each question's budget")
    attribution.set_defaults(func=cmd_attribution)


def cmd_attribution(args: argparse.Namespace) -> int:
    from bench.attribution import citation_share, questions_of, run, share_report

    if args.url is None:
        print(run(args.threshold, args.seeds))
        return 0
    key = args.key or Path(".ragtime/demo-api-key").read_text().strip()
    share = citation_share(
        args.url, key, questions_of(args.questions, args.limit), budget_ms=args.budget_ms
    )
    print(share_report(share))
    return 0


def _register_safety(bench_sub: Any) -> None:
    safety = bench_sub.add_parser(
        "safety",
        help="precision and recall of the injection screen and the PII redaction",
        description="In-process, no server or model: the passage screen (app/injection.py) and "
        "the redaction (app/redaction.py) on the labelled sets of bench/safety.py and the demo "
        "corpus (all clean), with their cost per passage.",
    )
    safety.add_argument("--corpus", type=Path, help="clean passages (default: demo/corpus)")
    safety.add_argument("--json", type=Path, help="write the figures here")
    safety.set_defaults(func=cmd_safety)


def cmd_safety(args: argparse.Namespace) -> int:
    import dataclasses

    from bench.report import write_figures
    from bench.safety import DEMO_CORPUS, measure, table

    result = measure(args.corpus or DEMO_CORPUS)
    print(table(result))
    if args.json:
        write_figures(dataclasses.asdict(result), args.json)
    return 0


def _register_ocr(bench_sub: Any) -> None:
    ocr = bench_sub.add_parser(
        "ocr",
        help="OCR of scanned pages: pages per second and word accuracy",
        description="In-process, no server or model: A4 pages of known English and Spanish "
        "text drawn with Pillow at 300 dpi, put in a PDF of images only and parsed as ingest "
        "parses it (PDFium renders, Tesseract reads); the text read is scored against the text "
        "drawn (bench/ocr.py). Needs Debian's tesseract-ocr, -eng and -spa (`make ocr-tools`).",
    )
    ocr.add_argument("--pages", type=int, default=6, help="pages, half English, half Spanish")
    ocr.add_argument("--runs", type=int, default=3, help="the time is the median of the runs")
    ocr.add_argument("--dpi", type=int, default=300, help="resolution the pages are drawn at")
    ocr.add_argument("--worn", action="store_true", help="pages turned, blurred and specked")
    ocr.add_argument("--json", type=Path, help="write the figures here")
    ocr.set_defaults(func=cmd_ocr)


def cmd_ocr(args: argparse.Namespace) -> int:
    import dataclasses

    from bench.ocr import measure, table
    from bench.report import write_figures
    from retrieval.formats.ocr import TESSERACT_PACKAGE, find_tesseract

    if find_tesseract() is None:
        print(f"error: OCR needs {TESSERACT_PACKAGE} (make ocr-tools)", file=sys.stderr)
        return 2
    result = measure(args.pages, args.runs, dpi=args.dpi, worn=args.worn)
    print(table(result))
    if args.json:
        figures = dataclasses.asdict(result) | {"pages_per_s": result.pages_per_s}
        write_figures(figures, args.json)
    return 0


def _register_documents(bench_sub: Any) -> None:
    documents = bench_sub.add_parser(
        "documents",
        help="e-mails with attachments, a scanned receipt and copies: ingested, then searched",
        description="In-process, no server: a folder of e-mails, each with a PDF, a DOCX, an "
        "XLSX, a CSV and a photographed receipt attached, and PDFs with byte-identical copies, "
        "built with the libraries that write each format; ingested with the configured "
        "embedder, then each file's own number searched for in each mode (bench/documents.py).",
    )
    documents.add_argument("--threads", type=int, default=10, help="e-mails")
    documents.add_argument("--copies", type=int, default=4, help="PDFs with a copy each")
    documents.add_argument("--json", type=Path, help="write the figures here")
    documents.set_defaults(func=cmd_documents)


def cmd_documents(args: argparse.Namespace) -> int:
    from bench.documents import measure, table
    from bench.report import write_figures

    if args.threads < 1 or args.copies < 0:
        print("error: --threads must be 1 or more and --copies 0 or more", file=sys.stderr)
        return 2
    result = measure(
        threads=args.threads, copies=args.copies, say=lambda line: print(line, file=sys.stderr)
    )
    print(table(result))
    if args.json:
        write_figures(result.to_json(), args.json)
    return 0


def cmd_quality(args: argparse.Namespace) -> int:
    import asyncio

    from app.config import get_settings
    from bench.quality import QualityResult, measure_quality

    settings = get_settings()
    if args.python_faq:
        return _quality_on_python_faq(args, settings)
    questions = read_questions(args.questions)[: args.limit]
    measured = asyncio.run(measure_quality(questions, settings=settings))
    return _write_quality(args, settings, measured, QualityResult.model_fields["measure"].default)


def _quality_on_python_faq(args: argparse.Namespace, settings: Any) -> int:
    import asyncio

    from app.services import default_embedder
    from bench.quality import faq_cases, measure_quality
    from retrieval.eval import EvalDataMissing, build_dataset, require_sources
    from retrieval.eval.retrievers import COLLECTION, ragtime_store

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    work = args.work_dir or settings.data_dir / "eval" / "work"
    try:
        dataset = build_dataset(
            require_sources(args.python_faq), work / "corpus", sample=args.sample
        )
    except EvalDataMissing as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    embedder = default_embedder(settings)
    embedder.load()
    store = ragtime_store(
        dataset,
        embedder,
        work,
        say,
        chunk_tokens=settings.chunk_tokens,
        overlap_tokens=settings.chunk_overlap_tokens,
    )
    try:
        step = max(1, len(dataset.questions) // max(args.limit, 1))
        chosen = dataset.questions[::step][: args.limit]  # spread over the FAQ's pages
        answers = {
            q.text: (dataset.corpus_dir / q.answer_source).read_text(encoding="utf-8")
            for q in chosen
        }
        cases = faq_cases(store, COLLECTION, embedder, answers, settings.top_k)
        measured = asyncio.run(measure_quality(list(answers), settings=settings, cases=cases))
    finally:
        store.close()
    measure = (
        "the content words of each question's own answer (the Python FAQ's, as its authors "
        f"wrote it) that the answer holds, relative to the full plan, over {measured.questions} "
        f"Python FAQ questions (other documents sampled at {args.sample:.0%})"
    )
    return _write_quality(args, settings, measured, measure)


def _write_quality(args: argparse.Namespace, settings: Any, measured: Any, measure: str) -> int:
    from bench.quality import QualityResult, quality_table, table
    from bench.report import command_line, machine_info, now_iso, versions, write_json
    from tracing.budget import DEFAULT_QUALITY_PATH, QualityTable

    result = QualityResult(
        created=now_iso(),
        command=command_line(getattr(args, "argv", None) or sys.argv[1:]),
        machine=machine_info(),
        versions=versions(),
        questions=measured.questions,
        context_tokens=settings.context_tokens,
        max_output_tokens=settings.max_output_tokens,
        full_score_mean=round(measured.full_score, 3),
        full_generate_ms_p50=round(measured.full_ms, 1),
        context=measured.context,
        output=measured.output,
        pruned=measured.pruned,
        measure=measure,
    )
    print(table(result))
    if args.json:
        write_json(result, args.json)
    if args.table:
        shipped = QualityTable.load(DEFAULT_QUALITY_PATH)
        rerank = shipped.curves.get("rerank", [(0.0, 0.95), (1.0, 1.0)])
        quality_table(result, rerank, shipped).dump(args.table)
        print(f"wrote {args.table}", file=sys.stderr)
    return 0


def cmd_section(args: argparse.Namespace) -> int:
    from bench.budget_md import write_section
    from bench.goodput import read_goodput_json
    from bench.quality import QualityResult

    if args.goodput or args.quality or not (args.fresh or args.burst):
        goodputs = [read_goodput_json(path) for path in args.goodput]
        quality = (
            QualityResult.model_validate_json(args.quality.read_text()) if args.quality else None
        )
        write_section(args.out, goodputs, quality)
        print(f"wrote the budget engine's section of {args.out}", file=sys.stderr)
    if args.fresh:
        from bench.fresh import read_fresh_json
        from bench.fresh import write_section as write_fresh_section

        write_fresh_section(args.out, read_fresh_json(args.fresh))
        print(f"wrote the fresh-process section of {args.out}", file=sys.stderr)
    if args.burst:
        from bench.burst_md import read_burst_json
        from bench.burst_md import write_section as write_burst_section

        before = read_burst_json(args.burst_before) if args.burst_before else None
        write_burst_section(args.out, [read_burst_json(p) for p in args.burst], before)
        print(f"wrote the bursts section of {args.out}", file=sys.stderr)
    return 0


def cmd_budget(args: argparse.Namespace) -> int:
    from bench.budget import run_budget_bench, text_report, write_budget_json
    from bench.report import command_line

    logging.getLogger("httpx").setLevel(logging.WARNING)
    questions = read_questions(args.questions)
    if args.fresh_starts is not None:
        return _fresh(args, questions)
    if args.budgets:
        return _goodput(args, questions)
    if args.budget_ms is None or len(args.serve) != 1:
        print("error: the fault mode needs --budget-ms and one --serve", file=sys.stderr)
        return 2
    faults = [(name, ms) for name, ms in (("rerank", args.rerank_delay_ms),
                                         ("generate", args.token_delay_ms)) if ms > 0]  # fmt: skip
    if not questions or not faults:
        print("error: no questions, or no fault to inject", file=sys.stderr)
        return 2
    return _run_and_report(
        lambda: run_budget_bench(
            config_path=args.serve[0],
            questions=questions,
            budget_ms=args.budget_ms,
            faults=faults,
            users=args.concurrency,
            requests=args.requests,
            warmup=args.warmup,
            rounds=args.rounds,
            timeout_s=args.timeout,
            model_dir=args.model_dir,
            log_dir=args.log_dir,
            machinery_iterations=args.machinery_iterations,
            command=command_line(getattr(args, "argv", None) or sys.argv[1:]),
            show_progress=not args.no_progress,
        ),
        text_report,
        write_budget_json,
        args.json,
    )


T = TypeVar("T")


def _run_and_report(
    run: Callable[[], T],
    report: Callable[[T], str],
    write: Callable[[T, Path], None],
    json_path: Path | None,
) -> int:
    """Run a bench, print its report and write its JSON; a server or input failure is exit 1."""
    from bench.serve import ServerFailed

    try:
        result = run()
    except (ServerFailed, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(report(result))
    if json_path:
        write(result, json_path)
        print(f"\nwrote {json_path}", file=sys.stderr)
    return 0


def _goodput(args: argparse.Namespace, questions: list[str]) -> int:
    from bench.goodput import run_goodput, text_report
    from bench.report import command_line, write_json

    return _run_and_report(
        lambda: run_goodput(
            servers=[(path.stem, path) for path in args.serve],
            questions=questions,
            multiples=args.budgets,
            users=args.concurrency,
            requests=args.requests,
            baseline=args.baseline,
            cache_hits=args.cache_hits,
            repeat_share=args.repeat_share,
            timeout_s=args.timeout,
            log_dir=args.log_dir,
            command=command_line(getattr(args, "argv", None) or sys.argv[1:]),
            fake_sglang=args.fake_sglang,
            show_progress=not args.no_progress,
        ),
        text_report,
        write_json,
        args.json,
    )


def _fresh(args: argparse.Namespace, questions: list[str]) -> int:
    from bench.fresh import FRESH_ORDER, run_fresh, text_report, write_fresh_json
    from bench.report import command_line

    if args.budget_ms is None or args.budgets or args.fresh_starts < 1:
        print("error: the fresh mode needs --budget-ms and --fresh-starts >= 1, and no "
              "--budgets", file=sys.stderr)  # fmt: skip
        return 2
    return _run_and_report(
        lambda: run_fresh(
            servers=[(path.stem, path) for path in args.serve],
            questions=questions,
            order=args.fresh_order or FRESH_ORDER,
            budget_ms=args.budget_ms,
            starts=args.fresh_starts,
            timeout_s=args.timeout,
            log_dir=args.log_dir,
            command=command_line(getattr(args, "argv", None) or sys.argv[1:]),
            fake_sglang=args.fake_sglang,
            secret_keys=SECRET_KEYS,
            show_progress=not args.no_progress,
        ),
        text_report,
        write_fresh_json,
        args.json,
    )


def _register_burst(bench_sub: Any) -> None:
    burst = bench_sub.add_parser(
        "burst",
        help="bursts of simultaneous questions, and closed loops of users at fixed budgets",
        description="For each CONFIG: --bursts sends SIZE questions at once with a budget of "
        "BUDGET_S seconds, --repeats times each; --users runs closed loops of that many users "
        "at each of --budgets-ms. Reports answered, refused (and how fast), 504s, late answers "
        "and errors against issue 22's targets (bench.burst).",
    )
    burst.add_argument("--serve", type=Path, required=True, metavar="CONFIG", action="append")
    burst.add_argument("--bursts", metavar="SIZE@S[,...]", help="e.g. 25@1,100@1,200@2")
    burst.add_argument("--repeats", type=int, default=3, help="runs of each burst")
    burst.add_argument("--pause", type=float, default=2.0, help="seconds idle before a burst")
    burst.add_argument("--users", type=int, help="closed loops of this many users")
    burst.add_argument("--budgets-ms", type=_ints, default=[1500, 900, 600], metavar="MS[,MS...]")
    burst.add_argument("--requests", type=int, default=120, help="requests per users' loop")
    burst.add_argument("--warmup", type=int, default=4, help="uncounted requests first")
    burst.add_argument("--fake-sglang", metavar="SPEC", help="as in `bench load`")
    burst.add_argument("--timeout", type=float, default=30.0, help="per-request limit, s")
    burst.add_argument(
        "--questions", type=Path, default=DEMO_QUESTIONS, help="one question per line"
    )
    burst.add_argument("--log-dir", type=Path, default=Path("bench-results/logs"))
    burst.add_argument("--json", type=Path, help="write the result here")
    burst.set_defaults(func=cmd_burst)


def cmd_burst(args: argparse.Namespace) -> int:
    from bench.burst import parse_bursts, run_burst_bench, text_report, write_burst_json
    from bench.report import command_line

    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        bursts = parse_bursts(args.bursts) if args.bursts else []
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not bursts and not args.users:
        print("error: give --bursts, --users or both", file=sys.stderr)
        return 2
    questions = read_questions(args.questions)
    return _run_and_report(
        lambda: run_burst_bench(
            servers=[(path.stem, path) for path in args.serve],
            questions=questions,
            bursts=bursts,
            users=args.users,
            budgets_ms=args.budgets_ms,
            requests=args.requests,
            repeats=args.repeats,
            warmup=args.warmup,
            pause_s=args.pause,
            timeout_s=args.timeout,
            log_dir=args.log_dir,
            command=command_line(getattr(args, "argv", None) or sys.argv[1:]),
            fake_sglang=args.fake_sglang,
            secret_keys=SECRET_KEYS,
            say=lambda line: print(line, file=sys.stderr),
        ),
        text_report,
        write_burst_json,
        args.json,
    )


def cmd_machinery(args: argparse.Namespace) -> int:
    from bench.budget import machinery_line
    from bench.machinery import measure_machinery
    from bench.report import write_json

    cost = measure_machinery(args.iterations)
    print(machinery_line(cost) + ".")
    if args.json:
        write_json(cost, args.json)
    return 0


def add_embed_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``ragtime bench embed``."""
    parser.add_argument("--chunks", type=int, default=0, help="demo chunks compared (0 = all)")
    parser.add_argument("--rounds", type=int, default=5, help="timing rounds")
    parser.add_argument("--batches", type=int, default=6, help="batches of 32 timed per round")
    parser.add_argument("--tokens", type=int, default=100, help="tokens per timed passage")
    parser.add_argument("--cache-dir", type=Path, help="ONNX exports (default: a temp dir)")


def cmd_embed(args: argparse.Namespace) -> int:
    from bench.embed import run

    print(run(args))
    return 0


def cmd_embed_threads(args: argparse.Namespace) -> int:
    from bench.embed_threads import run

    print(run(args))
    return 0


def _ints(text: str) -> list[int]:
    values = [int(v) for v in text.split(",") if v.strip()]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def _floats(text: str) -> list[float]:
    values = [float(v) for v in text.split(",") if v.strip()]
    if not values or min(values) <= 0:
        raise argparse.ArgumentTypeError(f"expected positive rates, got {text!r}")
    return values


def read_questions(path: Path) -> list[str]:
    """Non-empty lines that are not ``#`` comments."""
    lines = [line.strip() for line in path.read_text().splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def cmd_load(args: argparse.Namespace) -> int:
    from bench.report import text_report, write_json
    from bench.serve import ServerFailed

    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request otherwise
    questions = read_questions(args.questions)
    if not questions:
        print(f"error: no questions in {args.questions}", file=sys.stderr)
        return 2
    try:
        with ExitStack() as stack:
            targets, infos = _targets(args, stack)
            result = asyncio.run(_run(args, questions, targets, infos))
    except (ServerFailed, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(text_report(result))
    if args.json:
        write_json(result, args.json)
        print(f"\nwrote {args.json}", file=sys.stderr)
    if args.plots:
        from bench.plots import plot_all

        for path in plot_all(result.runs, args.plots):
            print(f"wrote {path}", file=sys.stderr)
    return 0


def _targets(args: argparse.Namespace, stack: ExitStack) -> tuple[list[Any], list[Any]]:
    """Start the servers asked for (stopped when ``stack`` closes); targets and their infos."""
    from bench.client import Target
    from bench.results import TargetInfo
    from bench.serve import config_key, floor_server, ragtime_server, read_config
    from bench.sglang_sim.process import with_simulated_sglang

    targets: list[Target] = []
    infos: list[TargetInfo] = []
    configs = [(Path(p), read_config(Path(p))) for p in args.serve]
    if args.floor:
        tokens = args.floor_tokens or _max_output_tokens(configs[0][1] if configs else {})
        server = stack.enter_context(floor_server(tokens, log_dir=args.log_dir))
        targets.append(Target("floor", server.url))
        infos.append(TargetInfo(name="floor", url=server.url, kind="floor",
                                config={"tokens": str(tokens)}))  # fmt: skip
    names: set[str] = {t.name for t in targets}
    for path, config in configs:
        name = path.stem if path.stem not in names else f"{path.stem}-{len(names)}"
        names.add(name)
        spec = getattr(args, "fake_sglang", None)
        config = with_simulated_sglang(stack, config, spec, log_dir=args.log_dir, name=name)
        _say(args, f"starting {name} from {path} ...")
        server = stack.enter_context(
            ragtime_server(
                name, config, log_dir=args.log_dir, profile_dir=getattr(args, "profile", None)
            )
        )
        targets.append(Target(name, server.url, args.key or config_key(config)))
        shown = {k: v for k, v in config.items() if k not in SECRET_KEYS}
        infos.append(TargetInfo(name=name, url=server.url, kind="ragtime",
                                config_path=str(path), config=shown))  # fmt: skip
    if args.url or not targets:
        url, key = _default_url_and_key(args)
        targets.append(Target("ragtime", url, key))
        infos.append(TargetInfo(name="ragtime", url=url, kind="url"))
    return targets, infos


def _max_output_tokens(config: dict[str, str]) -> int:
    from app.config import Settings

    default = Settings.model_fields["max_output_tokens"].default
    return int(config.get("RAGTIME_MAX_OUTPUT_TOKENS", default))


def _default_url_and_key(args: argparse.Namespace) -> tuple[str, str | None]:
    from app.config import get_settings

    settings = get_settings()
    url = args.url or f"http://{settings.host}:{os.environ.get('PORT', settings.port)}"
    key = args.key or os.environ.get("RAGTIME_API_KEY")
    if not key and settings.demo_key_path.exists():
        key = settings.demo_key_path.read_text().strip()
    return url.rstrip("/"), key


async def _run(
    args: argparse.Namespace, questions: list[str], targets: list[Any], infos: list[Any]
) -> Any:
    from bench.report import command_line, machine_info, now_iso, versions
    from bench.results import BenchResult, Ceiling, Run, compare
    from bench.runner import LoadSpec, measure, sweep

    machine, created = machine_info(), now_iso()
    requests = args.requests if args.requests or args.duration else 50
    base: dict[str, Any] = {
        "requests": requests if not args.duration else None,
        "duration_s": args.duration,
        "warmup": args.warmup,
        "budget_ms": args.budget_ms,
        "rounds": args.rounds or (4 if len(targets) > 1 else 1),
        "seed": args.seed,
        "timeout_s": args.timeout,
    }
    show = not args.no_progress
    runs: list[Run] = []
    ceilings: list[Ceiling] = []
    if args.rates and len(args.rates) > 1:
        minimum, duration = args.min_requests, args.duration

        def requests_at(rate: float) -> int:
            return max(minimum, math.ceil(rate * duration))

        spec = LoadSpec(rate=args.rates[0], **base)
        runs, ceilings = await sweep(
            targets, questions, spec, args.rates,
            requests_at=requests_at if duration and minimum else None,
            patience=2 if args.stop_at_ceiling else None, show_progress=show,
        )  # fmt: skip
    elif args.rate or args.rates:
        spec = LoadSpec(rate=args.rate or args.rates[0], **base)
        runs = await measure(targets, questions, spec, show_progress=show)
    else:
        for users in args.concurrency or [1]:
            spec = LoadSpec(users=users, **base)
            runs += await measure(targets, questions, spec, show_progress=show)
    if hasattr(os, "getloadavg"):
        machine["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return BenchResult(
        created=created,
        command=command_line(getattr(args, "argv", None) or sys.argv[1:]),
        machine=machine,
        versions=versions(),
        targets=infos,
        runs=runs,
        comparisons=compare(runs),
        ceilings=ceilings,
    )


def cmd_report(args: argparse.Namespace) -> int:
    from bench.benchmarks_md import write_benchmarks
    from bench.budget import read_budget_json
    from bench.report import read_json

    written = write_benchmarks(
        args.out,
        cpu=read_json(args.cpu),
        overhead=read_json(args.overhead),
        ceilings=[read_json(path) for path in args.ceiling],
        plot_dir=args.plots,
        setup_command=args.setup_command,
        budget=read_budget_json(args.budget) if args.budget else None,
        prefix=read_json(args.prefix) if args.prefix else None,
        prefix_fake=read_json(args.prefix_fake) if args.prefix_fake else None,
        prefix_states=read_json(args.prefix_states) if args.prefix_states else None,
        profile=args.profile,
    )
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 0


def _say(args: argparse.Namespace, text: str) -> None:
    if not args.no_progress:
        print(text, file=sys.stderr, flush=True)
