"""Builders of small document files for the format tests: PDF (fpdf2), DOCX (python-docx), XLSX
(openpyxl), e-mail (the standard library's ``email``), and broken ones of each binary type; PDFs
of scanned pages (Pillow, fpdf2) from images of text (``bench.suites.ocr.render_text``)."""

from __future__ import annotations

import zipfile
from email.message import EmailMessage
from pathlib import Path

import docx
from fpdf import FPDF
from openpyxl import Workbook
from PIL.Image import Image


def make_pdf(path: Path, pages: list[list[str]], *, title: str = "") -> Path:
    """A PDF with a text layer: one page per item, each paragraph of it a ``multi_cell``."""
    pdf = FPDF()
    pdf.set_font("helvetica", size=11)
    if title:
        pdf.set_title(title)
    for paragraphs in pages:
        pdf.add_page()
        for paragraph in paragraphs:
            pdf.multi_cell(0, 6, paragraph)
            pdf.ln(6)  # a blank line between paragraphs
    pdf.output(str(path))
    return path


def make_scanned_pdf(path: Path, pages: int = 2) -> Path:
    """A PDF whose pages carry only drawings, no text: what a scanner makes, as far as text goes."""
    pdf = FPDF()
    for _ in range(pages):
        pdf.add_page()
        pdf.set_fill_color(40, 40, 40)
        pdf.rect(20, 20, 120, 40, style="F")
    pdf.output(str(path))
    return path


def make_image_pdf(path: Path, pages: list[Image], *, dpi: int = 200) -> Path:
    """A PDF of images only, one a page, as Pillow writes it: a scan, with no text layer."""
    first, *rest = pages
    first.save(path, "PDF", resolution=dpi, save_all=True, append_images=rest)
    return path


def make_mixed_pdf(path: Path, text: list[str], scan: Image) -> Path:
    """Page 1 with a text layer (``text``, a paragraph each), page 2 the image ``scan`` alone."""
    pdf = FPDF()
    pdf.set_font("helvetica", size=11)
    pdf.add_page()
    for paragraph in text:
        pdf.multi_cell(0, 6, paragraph)
        pdf.ln(6)
    pdf.add_page()
    pdf.image(scan, x=10, y=10, w=190)
    pdf.output(str(path))
    return path


def make_docx(path: Path) -> Path:
    """A Word file: a Title, two heading levels, paragraphs and a table."""
    document = docx.Document()
    document.core_properties.title = ""
    document.add_paragraph("Travel Policy", style="Title")
    document.add_paragraph("Who may travel, and how the costs are paid back.")
    document.add_heading("Booking", level=1)
    document.add_paragraph("Book trains at least two weeks ahead.")
    document.add_heading("Hotels", level=2)
    document.add_paragraph("A hotel night costs at most 150 euros in Paris.")
    document.add_heading("Refunds", level=1)
    table = document.add_table(rows=2, cols=2)
    table.rows[0].cells[0].text = "Item"
    table.rows[0].cells[1].text = "Deadline"
    table.rows[1].cells[0].text = "Taxi receipts"
    table.rows[1].cells[1].text = "30 days"
    document.save(str(path))
    return path


def make_xlsx(path: Path) -> Path:
    """A workbook of two sheets, the first with a header row and an empty cell."""
    workbook = Workbook()
    sheet = workbook.active
    assert sheet is not None
    sheet.title = "Staff"
    sheet.append(["Name", "Role", "Office"])
    sheet.append(["Ada Lovelace", "Analyst", "London"])
    sheet.append(["Grace Hopper", None, "Arlington"])
    other = workbook.create_sheet("Rooms")
    other.append(["Room", "Seats"])
    other.append(["Babbage", 12])
    workbook.save(str(path))
    return path


def make_eml(path: Path, *, html: bool = False) -> Path:
    """A mail with a plain (or HTML) body, a text attachment and a binary one."""
    message = EmailMessage()
    message["Subject"] = "Quarterly report is late"
    message["From"] = "Ada <ada@example.org>"
    message["To"] = "team@example.org"
    message["Date"] = "Tue, 01 Dec 2026 09:30:00 +0000"
    body = "The quarterly report will arrive on Friday.\n\nThe printer broke down."
    if html:
        message.set_content(f"<html><body><p>{body}</p></body></html>", subtype="html")
    else:
        message.set_content(body)
    message.add_attachment(
        "Figures\n=======\n\nRevenue grew by 12 percent.\n", subtype="plain", filename="figures.rst"
    )
    message.add_attachment(
        b"\x89PNG\r\n\x1a\n", maintype="image", subtype="png", filename="chart.png"
    )
    path.write_bytes(bytes(message))
    return path


def make_broken(path: Path) -> Path:
    """A file of ``path``'s binary type that its parser cannot read: a truncated zip or PDF."""
    if path.suffix == ".pdf":
        path.write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 2 0 R >>\ntrailer garbage")
    else:  # .docx and .xlsx are zip packages: one cut short is no package at all
        inner = path.with_suffix(".zip")
        with zipfile.ZipFile(inner, "w") as package:
            package.writestr("[Content_Types].xml", "<Types/>" * 50)
        path.write_bytes(inner.read_bytes()[:60])
        inner.unlink()
    return path
