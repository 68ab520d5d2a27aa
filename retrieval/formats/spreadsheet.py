"""Spreadsheets, XLSX (openpyxl) and CSV (the ``csv`` module): one block per row, each cell
written after its column's header: "Name: Ada; Born: 1815".

The first row with any value is the header row; a column without a header is named by its
letter (A, B, ...). A workbook's sheets are its sections. openpyxl reads cached values, never
formulas' code, and parses XML through defusedxml when installed (it is, as a dependency).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence

from openpyxl import load_workbook
from openpyxl.utils import get_column_letter

from retrieval.formats.document import Block, Document
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


def parse_xlsx(data: bytes) -> Document:
    workbook = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    try:
        blocks = [
            block
            for sheet in workbook.worksheets
            for block in _rows_as_blocks(sheet.iter_rows(values_only=True), (sheet.title,))
        ]
        title = (workbook.properties.title or "").strip()
    finally:
        workbook.close()
    return Document("xlsx", title=title, blocks=blocks)


def parse_csv(data: bytes) -> Document:
    text = decode_text(data)
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(
            text[:8192], delimiters=",;\t|"
        )
    except csv.Error:
        dialect = csv.excel
    rows = csv.reader(io.StringIO(text, newline=""), dialect)
    return Document("csv", blocks=_rows_as_blocks(rows, ()))
