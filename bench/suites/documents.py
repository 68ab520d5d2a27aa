"""``ragtime bench documents``: documents as they come, ingested and searched for.

A folder is built with the libraries that write each format, every file holding facts no other
file holds (an invoice number, a lease number, a stock code, a ticket, a receipt number):

* ``mail/thread-NN.eml``: e-mails (the standard library's ``email``), each with a PDF (fpdf2),
  a DOCX (python-docx) whose lease number is in its header, an XLSX (openpyxl), a CSV, and a
  photographed receipt (a PNG drawn by Pillow, ``bench.suites.ocr.render_text``) attached;
* ``files/contract-N.pdf``, and a byte-identical copy of each under ``files/backup/``.

It is ingested into a fresh store with the configured embedder (``retrieval.ingest_path``, as
``ragtime ingest`` does), then each fact is searched for as someone types it (the number) in
each search mode, top 5. Reported per kind of file: found first, found in the top 5, and for an
attachment whether the hit names its e-mail (``message``), for a copy whether the hit names the
copy too (``also``). The receipts are read by Tesseract (``make ocr-tools``); without it they
are reported as not read.
"""

from __future__ import annotations

import argparse
import io
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from email.message import EmailMessage
from pathlib import Path
from typing import Any

MODES = ("dense", "keyword", "hybrid")
NAMES = ("Ada Byron", "Grace Hopper", "Alan Turing", "Edsger Dijkstra", "Barbara Liskov")
PLACES = ("harbour warehouse", "north depot", "river office", "hill studio", "old mill")
PRODUCTS = ("brass valves", "oak pallets", "steel cable", "copper pipe", "glass panes")


@dataclass(frozen=True)
class Fact:
    """One query and where its answer lives."""

    kind: str  # pdf, docx, xlsx, csv, image, copy
    query: str
    source: str  # the source a hit must have
    message: str = ""  # an attachment's e-mail
    copy: str = ""  # a copy's other name


@dataclass
class KindFigures:
    queries: int = 0
    first: int = 0
    top5: int = 0
    named: int = 0  # attachments: the hit names its e-mail; copies: the hit names the copy


@dataclass
class DocumentsResult:
    threads: int
    copies: int
    files: int  # on disk: e-mails and loose files
    documents: int  # files ingested (a copy is recorded, not ingested again)
    attachments: int
    copies_recorded: int
    failures: list[tuple[str, str]]
    ingest_s: float
    chunks: int
    tesseract: bool
    search_ms_p50: dict[str, float] = field(default_factory=dict)
    kinds: dict[str, dict[str, KindFigures]] = field(default_factory=dict)  # mode -> kind

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _pdf(lines: list[str]) -> bytes:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=11)
    pdf.add_page()
    for line in lines:
        pdf.multi_cell(0, 6, line, new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def _docx(header: str, body: str) -> bytes:
    import docx

    document = docx.Document()
    document.sections[0].header.paragraphs[0].text = header
    document.add_paragraph(body)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def _xlsx(rows: list[tuple[str, ...]]) -> bytes:
    from openpyxl import Workbook

    workbook = Workbook()
    sheet = workbook.active
    assert sheet is not None
    for row in rows:
        sheet.append(list(row))
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


def _receipt(lines: list[str]) -> bytes:
    from bench.suites.ocr import render_text

    buffer = io.BytesIO()
    render_text(lines, size_px=36, width=1400).save(buffer, "PNG")
    return buffer.getvalue()


def build_folder(root: Path, *, threads: int = 10, copies: int = 4) -> list[Fact]:
    """Write the folder under ``root``; the facts to search for."""
    facts: list[Fact] = []
    mail = root / "mail"
    mail.mkdir(parents=True)
    for i in range(threads):
        name, place, product = NAMES[i % 5], PLACES[i % 5], PRODUCTS[i % 5]
        thread = f"mail/thread-{i:02d}.eml"
        invoice, lease, sku, ticket, receipt = (
            f"INV-{4100 + i}",
            f"LSE-{200 + i}",
            f"SKU-{7000 + i}",
            f"TCK-{900 + i}",
            f"RCP-{3300 + i}",
        )
        message = EmailMessage()
        message["Subject"] = f"Papers for the {place}, week {i + 1}"
        message["From"] = f"{name} <office@example.org>"
        message["To"] = "board@example.org"
        message.set_content(f"Attached are this week's papers for the {place}.\n")
        attachments = {
            f"invoice-{i:02d}.pdf": (
                "application",
                "pdf",
                _pdf([f"Invoice {invoice}", f"{product}: {12 + i} units, approved by {name}."]),
            ),
            f"lease-{i:02d}.docx": (
                "application",
                "vnd.openxmlformats-officedocument.wordprocessingml.document",
                _docx(f"Lease {lease}", f"The lease of the {place} renews in spring."),
            ),
            f"stock-{i:02d}.xlsx": (
                "application",
                "vnd.openxmlformats-officedocument.spreadsheetml.sheet",
                _xlsx([("Code", "Product", "Count"), (sku, product, str(40 + i))]),
            ),
            f"tickets-{i:02d}.csv": (
                "text",
                "csv",
                f"Ticket,State,Place\n{ticket},open,{place}\n".encode(),
            ),
            f"receipt-{i:02d}.png": (
                "image",
                "png",
                _receipt([f"RECEIPT {receipt}", f"{product} paid in cash"]),
            ),
        }
        queries = {"pdf": invoice, "docx": lease, "xlsx": sku, "csv": ticket, "image": receipt}
        for (filename, (maintype, subtype, data)), kind in zip(
            attachments.items(), queries, strict=True
        ):
            message.add_attachment(data, maintype=maintype, subtype=subtype, filename=filename)
            facts.append(Fact(kind, queries[kind], f"{thread}#{filename}", message=thread))
        (root / thread).write_bytes(bytes(message))
    backup = root / "files" / "backup"
    backup.mkdir(parents=True)
    for j in range(copies):
        contract = f"CTR-{5500 + j}"
        data = _pdf([f"Contract {contract}", f"Signed for the {PLACES[j % 5]}."])
        (root / "files" / f"contract-{j}.pdf").write_bytes(data)
        (backup / f"contract-{j}-copy.pdf").write_bytes(data)
        facts.append(
            Fact(
                "copy",
                contract,
                f"files/backup/contract-{j}-copy.pdf",
                copy=f"files/contract-{j}.pdf",
            )
        )
    return facts


def _named(fact: Fact, hit: Any) -> bool:
    if fact.kind == "copy":
        return {hit.source, *hit.also} == {fact.source, fact.copy}
    return bool(hit.message == fact.message)


def _matches(fact: Fact, hit: Any) -> bool:
    names = {hit.source, *hit.also}
    return fact.source in names or (bool(fact.copy) and fact.copy in names)


def measure(
    *, threads: int = 10, copies: int = 4, say: Callable[[str], None] = lambda line: None
) -> DocumentsResult:
    """Build, ingest and search the folder (see the module's docstring)."""
    from app.pipeline.services import default_embedder
    from app.settings import get_settings
    from retrieval import DocumentStore, ingest_path
    from retrieval.eval.retrievers import search_in_mode
    from retrieval.formats.ocr import find_tesseract

    settings = get_settings()
    embedder = default_embedder(settings)
    embedder.load()
    work = Path(tempfile.mkdtemp(prefix="ragtime-bench-documents-"))
    try:
        facts = build_folder(work / "folder", threads=threads, copies=copies)
        store = DocumentStore(
            work / "store", embedding_backend=embedder.backend, embedding_model=embedder.model_name
        )
        store.open()
        started = time.perf_counter()
        report = ingest_path(
            work / "folder", collection="documents", embedder=embedder, store=store
        )
        ingest_s = time.perf_counter() - started
        say(f"ingested in {ingest_s:.1f} s: {report.files} documents, {report.chunks} chunks")
        files = sum(1 for p in (work / "folder").rglob("*") if p.is_file())
        result = DocumentsResult(
            threads=threads,
            copies=copies,
            files=files,
            documents=report.files,
            attachments=len(report.attachments),
            copies_recorded=len(report.copies),
            failures=list(report.failures),
            ingest_s=round(ingest_s, 2),
            chunks=report.chunks,
            tesseract=find_tesseract() is not None,
        )
        vectors = embedder.embed([fact.query for fact in facts])
        for mode in MODES:
            figures: dict[str, KindFigures] = {}
            times = []
            for fact, vector in zip(facts, vectors, strict=True):
                began = time.perf_counter()
                hits = search_in_mode(store, mode, fact.query, vector, 5, "documents")
                times.append((time.perf_counter() - began) * 1000.0)
                kind = figures.setdefault(fact.kind, KindFigures())
                kind.queries += 1
                found = [hit for hit in hits if _matches(fact, hit)]
                kind.top5 += bool(found)
                kind.first += bool(hits) and _matches(fact, hits[0])
                kind.named += bool(found) and _named(fact, found[0])
            result.kinds[mode] = figures
            result.search_ms_p50[mode] = round(statistics.median(times), 3)
        store.close()
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def table(result: DocumentsResult) -> str:
    """The figures as Markdown."""
    tesseract = "present" if result.tesseract else "absent"
    lines = [
        f"{result.files} files on disk ({result.threads} e-mails with 5 attachments each, "
        f"{result.copies} PDFs and a byte-identical copy of each): {result.documents} files "
        f"ingested and their {result.attachments} attachments as documents of their own, "
        f"{result.copies_recorded} copies recorded, {len(result.failures)} failures, "
        f"{result.chunks} chunks in {result.ingest_s:.1f} s; Tesseract {tesseract}.",
        "",
        "| mode | kind | queries | found first | in the top 5 | the hit names its e-mail or copy |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for mode, kinds in result.kinds.items():
        for kind, f in kinds.items():
            lines.append(f"| {mode} | {kind} | {f.queries} | {f.first} | {f.top5} | {f.named} |")
    lines.append("")
    lines.append(
        "Search ms p50 (in-process, embedding not included): "
        + ", ".join(f"{mode} {ms:.2f}" for mode, ms in result.search_ms_p50.items())
    )
    lines += [f"failure: {source}: {reason}" for source, reason in result.failures]
    return "\n".join(lines)


def register(subparsers: Any) -> None:
    """Add ``documents`` to ``ragtime bench``'s subcommands."""
    documents = subparsers.add_parser(
        "documents",
        help="e-mails with attachments, a scanned receipt and copies: ingested, then searched",
        description="In-process, no server: a folder of e-mails, each with a PDF, a DOCX, an "
        "XLSX, a CSV and a photographed receipt attached, and PDFs with byte-identical copies, "
        "built with the libraries that write each format; ingested with the configured "
        "embedder, then each file's own number searched for in each mode "
        "(bench/suites/documents.py).",
    )
    documents.add_argument("--threads", type=int, default=10, help="e-mails")
    documents.add_argument("--copies", type=int, default=4, help="PDFs with a copy each")
    documents.add_argument("--json", type=Path, help="write the figures here")
    documents.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bench.harness.record import write_figures

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
