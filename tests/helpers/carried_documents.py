"""Builders of documents as they come: an e-mail with real files attached (a PDF by fpdf2, a
DOCX by python-docx, an XLSX by openpyxl, a CSV, a PNG by Pillow; the message by the standard
library's ``email``), and a DOCX with a header, a footer, a footnote, a text box and a comment.

python-docx writes headers, footers and comments itself. It has no API for footnotes or text
boxes, so they are added as Word writes them: a ``word/footnotes.xml`` part related to the main
part (with Word's two separator notes), referenced from a run by ``w:footnoteReference``; a text
box as ``mc:AlternateContent`` holding a DrawingML shape (``wps:txbx``) and its VML fallback
(``v:textbox``), both with the same ``w:txbxContent``.
"""

from __future__ import annotations

import io
from email.message import EmailMessage
from pathlib import Path

import docx
from docx.document import Document as DocxDocument
from docx.opc.constants import CONTENT_TYPE as CT
from docx.opc.constants import RELATIONSHIP_TYPE as RT
from docx.opc.packuri import PackURI
from docx.opc.part import Part
from docx.oxml.parser import parse_xml
from fpdf import FPDF
from openpyxl import Workbook
from PIL import Image

#: One sentence per attachment, each with a word no other holds, to search them by.
PDF_TEXT = "The turbine inspection found corrosion on blade seven."
DOCX_TEXT = "The catering contract renews every April with a harpist."
XLSX_ROW = ("Zeppelin hangar", "rented", "Friedrichshafen")
CSV_TEXT = "Quokka enclosure,cleaned,Tuesday"
BODY_TEXT = "Please find the inspection papers attached before the board meets."

HEADER_TEXT = "Letterhead of the Albatross Shipping Company"
FOOTER_TEXT = "Printed on recycled kelp paper"
FOOTNOTE_TEXT = "Measured by the harbour pilot at low tide."
TEXT_BOX_TEXT = "Sidebar: the lighthouse keeper retires in spring."
COMMENT_TEXT = "Check the tonnage against the manifest."
COMMENT_AUTHOR = "Grace Hopper"

_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def pdf_bytes(text: str = PDF_TEXT) -> bytes:
    pdf = FPDF()
    pdf.set_font("helvetica", size=11)
    pdf.add_page()
    pdf.multi_cell(0, 6, text)
    return bytes(pdf.output())


def docx_bytes(text: str = DOCX_TEXT) -> bytes:
    document = docx.Document()
    document.add_paragraph(text)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def xlsx_bytes(row: tuple[str, ...] = XLSX_ROW) -> bytes:
    workbook = Workbook()
    sheet = workbook.active
    assert sheet is not None
    sheet.append(["Place", "State", "Town"])
    sheet.append(list(row))
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


def png_bytes() -> bytes:
    """A blank image: nothing for OCR to read (and without Tesseract, it needs OCR)."""
    buffer = io.BytesIO()
    Image.new("L", (64, 32), 255).save(buffer, "PNG")
    return buffer.getvalue()


def make_thread(path: Path, *, subject: str = "Inspection papers", body: str = BODY_TEXT) -> Path:
    """An e-mail with a PDF, a DOCX, an XLSX, a CSV and a PNG attached."""
    message = EmailMessage()
    message["Subject"] = subject
    message["From"] = "Ada <ada@example.org>"
    message["To"] = "board@example.org"
    message["Date"] = "Wed, 02 Dec 2026 10:00:00 +0000"
    message.set_content(body)
    message.add_attachment(
        pdf_bytes(), maintype="application", subtype="pdf", filename="report.pdf"
    )
    message.add_attachment(
        docx_bytes(),
        maintype="application",
        subtype="vnd.openxmlformats-officedocument.wordprocessingml.document",
        filename="catering.docx",
    )
    message.add_attachment(
        xlsx_bytes(),
        maintype="application",
        subtype="vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        filename="hangars.xlsx",
    )
    message.add_attachment(f"Animal,State,Day\n{CSV_TEXT}\n", subtype="csv", filename="zoo.csv")
    message.add_attachment(png_bytes(), maintype="image", subtype="png", filename="chart.png")
    path.write_bytes(bytes(message))
    return path


def _text_box(text: str) -> str:
    content = f"<w:txbxContent><w:p><w:r><w:t>{text}</w:t></w:r></w:p></w:txbxContent>"
    return f"""<w:r xmlns:w="{_W}"
      xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"
      xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing"
      xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"
      xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape"
      xmlns:v="urn:schemas-microsoft-com:vml">
  <mc:AlternateContent>
    <mc:Choice Requires="wps">
      <w:drawing>
        <wp:inline>
          <wp:extent cx="1828800" cy="457200"/>
          <wp:docPr id="1" name="Text Box 1"/>
          <a:graphic>
            <a:graphicData uri="http://schemas.microsoft.com/office/word/2010/wordprocessingShape">
              <wps:wsp><wps:txbx>{content}</wps:txbx><wps:bodyPr/></wps:wsp>
            </a:graphicData>
          </a:graphic>
        </wp:inline>
      </w:drawing>
    </mc:Choice>
    <mc:Fallback>
      <w:pict><v:shape><v:textbox>{content}</v:textbox></v:shape></w:pict>
    </mc:Fallback>
  </mc:AlternateContent>
</w:r>"""


def footnotes_xml(*notes: str) -> bytes:
    """A footnotes part: Word's separator notes (ids -1 and 0), then ``notes`` from id 1."""
    separators = (
        '<w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p>'
        "</w:footnote>"
        '<w:footnote w:type="continuationSeparator" w:id="0"><w:p><w:r>'
        "<w:continuationSeparator/></w:r></w:p></w:footnote>"
    )
    body = "".join(
        f'<w:footnote w:id="{n}"><w:p><w:r><w:footnoteRef/></w:r><w:r><w:t xml:space="preserve">'
        f" {note}</w:t></w:r></w:p></w:footnote>"
        for n, note in enumerate(notes, start=1)
    )
    return f'<w:footnotes xmlns:w="{_W}">{separators}{body}</w:footnotes>'.encode()


def add_footnotes(document: DocxDocument, part_xml: bytes) -> None:
    """Relate a footnotes part holding ``part_xml`` to ``document``'s main part, and reference
    its first note from the end of the last paragraph."""
    part = Part(PackURI("/word/footnotes.xml"), CT.WML_FOOTNOTES, part_xml, document.part.package)
    document.part.relate_to(part, RT.FOOTNOTES)
    reference = parse_xml(f'<w:r xmlns:w="{_W}"><w:footnoteReference w:id="1"/></w:r>')
    document.paragraphs[-1]._p.append(reference)


def make_word_parts(path: Path) -> Path:
    """A DOCX whose body is one heading and one paragraph, with a header, a footer, a footnote,
    a text box and a comment, each holding one of this module's texts."""
    document = docx.Document()
    document.add_heading("Harbour report", level=1)
    paragraph = document.add_paragraph("The harbour was dredged in May.")
    section = document.sections[0]
    section.header.paragraphs[0].text = HEADER_TEXT
    section.footer.paragraphs[0].text = FOOTER_TEXT
    document.add_comment(paragraph.runs, text=COMMENT_TEXT, author=COMMENT_AUTHOR)
    paragraph._p.append(parse_xml(_text_box(TEXT_BOX_TEXT)))
    add_footnotes(document, footnotes_xml(FOOTNOTE_TEXT))
    document.save(str(path))
    return path
