"""Spreadsheets, XLSX (openpyxl) and CSV (the ``csv`` module): one block per row, each cell
written after its column's header: "Name: Ada; Born: 1815".

The first row with any value is the header row; a column without a header is named by its
letter (A, B, ...). A workbook's sheets are its sections. openpyxl reads cached values, never
formulas' code, and parses XML through defusedxml when installed (it is, as a dependency).

Limits: an XLSX package's members are measured before openpyxl inflates them
(``archive.check_archive``). Rows count against ``max_rows`` (all sheets together): first the
rows the sheets declare (their ``<dimension>``, which openpyxl pads every sheet to), then every
row as it streams, so a sheet that declares none is stopped at the limit too; a CSV's rows count
as the ``csv`` module reads them.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from typing import Any

from defusedxml import DefusedXmlException
from openpyxl import load_workbook
from openpyxl.utils import get_column_letter

from retrieval.errors import UnreadableDocument
from retrieval.formats.archive import check_archive
from retrieval.formats.document import Block, Document
from retrieval.formats.limits import DEFAULT_LIMITS, ParseLimits
from retrieval.formats.markup import decode_text


def _cell(value: object) -> str:
    return "" if value is None else " ".join(str(value).split())


def row_text(header: Sequence[object], row: Sequence[object]) -> str:
    """``"Header: value; ..."`` for the non-empty cells of ``row``."""
    parts = []
    for column, value in enumerate(row):
        cell = _cell(value)
        if not cell:
            continue
        name = _cell(header[column]) if column < len(header) else ""
        parts.append(f"{name or get_column_letter(column + 1)}: {cell}")
    return "; ".join(parts)


def _rows_as_blocks(rows: Iterable[Sequence[object]], path: tuple[str, ...]) -> list[Block]:
    header: Sequence[object] | None = None
    blocks = []
    for row in rows:
        if header is None:
            if any(_cell(value) for value in row):
                header = row
            continue
        if text := row_text(header, row):
            blocks.append(Block(text, path))
    return blocks


def _open_workbook(data: bytes) -> Any:
    """openpyxl's read-only workbook of ``data``; an XML entity, which defusedxml refuses,
    is named as the reason (openpyxl words it "invalid XML")."""
    try:
        return load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except ValueError as exc:
        if isinstance(exc.__cause__, DefusedXmlException):
            raise UnreadableDocument(f"XML entities are refused: {exc.__cause__}") from exc
        raise


def parse_xlsx(data: bytes, *, limits: ParseLimits = DEFAULT_LIMITS) -> Document:
    check_archive(data, limits)
    workbook = _open_workbook(data)
    try:
        declared = sum(sheet.max_row or 0 for sheet in workbook.worksheets)
        limits.check("max_rows", declared, what="the sheets declare ")
        rows = limits.tally("max_rows")
        blocks = [
            block
            for sheet in workbook.worksheets
            for block in _rows_as_blocks(
                rows.each(sheet.iter_rows(values_only=True)), (sheet.title,)
            )
        ]
        title = (workbook.properties.title or "").strip()
    finally:
        workbook.close()
    return Document("xlsx", title=title, blocks=blocks)


def parse_csv(data: bytes, *, limits: ParseLimits = DEFAULT_LIMITS) -> Document:
    text = decode_text(data)
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(
            text[:8192], delimiters=",;\t|"
        )
    except csv.Error:
        dialect = csv.excel
    rows = csv.reader(io.StringIO(text, newline=""), dialect)
    return Document("csv", blocks=_rows_as_blocks(limits.tally("max_rows").each(rows), ()))
