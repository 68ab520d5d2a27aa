"""Hostile documents built in a test (issue 24 §2): Office packages written as XML strings
straight into a zip (never through an object model, so a million paragraphs cost little to
make), zip headers that lie about sizes, PDFs of blank pages."""

from __future__ import annotations

import io
import zipfile

from pypdf import PdfWriter

MiB = 1024 * 1024
W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
S_NS = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
REL_NS = "http://schemas.openxmlformats.org/package/2006/relationships"
DOC_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
CONTENT_TYPES = "http://schemas.openxmlformats.org/package/2006/content-types"
XML = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
SECRET = "TOPSECRET"
#: An internal entity a billion characters long once expanded ("billion laughs").
LAUGHS = '<!ENTITY lol0 "lol">' + "".join(
    f'<!ENTITY lol{n} "{f"&lol{n - 1};" * 10}">' for n in range(1, 10)
)
PARAGRAPH = "<w:p><w:r><w:t>Hello.</w:t></w:r></w:p>"


def zipped(members: dict[str, bytes | str]) -> bytes:
    """A deflated zip archive of ``members``."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _relationships(*targets: tuple[str, str, str]) -> str:
    """A ``.rels`` part of (id, type, target) relationships."""
    items = "".join(
        f'<Relationship Id="{rid}" Type="{DOC_REL}/{kind}" Target="{target}"/>'
        for rid, kind, target in targets
    )
    return f'{XML}<Relationships xmlns="{REL_NS}">{items}</Relationships>'


def _content_types(**overrides: str) -> str:
    """``[Content_Types].xml``: rels and xml parts, ``overrides`` part -> content type."""
    parts = "".join(
        f'<Override PartName="/{part}" ContentType="application/vnd.openxmlformats-officedocument.'
        f'{kind}+xml"/>'
        for part, kind in overrides.items()
    )
    return (
        f'{XML}<Types xmlns="{CONTENT_TYPES}">'
        '<Default Extension="rels" '
        'ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        f'<Default Extension="xml" ContentType="application/xml"/>{parts}</Types>'
    )


def docx_with_body(body: str, doctype: str = "") -> bytes:
    """A minimal DOCX whose ``word/document.xml`` body is ``body``, after ``doctype``."""
    document = f'{XML}{doctype}<w:document xmlns:w="{W_NS}"><w:body>{body}</w:body></w:document>'
    return zipped(
        {
            "[Content_Types].xml": _content_types(
                **{"word/document.xml": "wordprocessingml.document.main"}
            ),
            "_rels/.rels": _relationships(("rId1", "officeDocument", "word/document.xml")),
            "word/document.xml": document,
        }
    )


def sheet_rows(count: int, start: int = 1) -> str:
    """``count`` rows of one number each, from row ``start``."""
    return "".join(
        f'<row r="{n}"><c r="A{n}"><v>{n}</v></c></row>' for n in range(start, start + count)
    )


def xlsx_with_sheets(
    *sheets: str, dimension: str = "", shared_strings: str = "", doctype: str = ""
) -> bytes:
    """A minimal XLSX of sheets whose ``<sheetData>`` holds the given rows; each sheet XML
    starts with ``doctype`` and declares ``dimension`` (none when empty)."""
    names = [f"xl/worksheets/sheet{n}.xml" for n in range(1, len(sheets) + 1)]
    listed = "".join(
        f'<sheet name="Sheet{n}" sheetId="{n}" r:id="rId{n}"/>' for n in range(1, len(sheets) + 1)
    )
    links = [(f"rId{n}", "worksheet", name[3:]) for n, name in enumerate(names, start=1)]
    kinds = {"xl/workbook.xml": "spreadsheetml.sheet.main"}
    kinds |= dict.fromkeys(names, "spreadsheetml.worksheet")
    members: dict[str, bytes | str] = {
        "_rels/.rels": _relationships(("rId1", "officeDocument", "xl/workbook.xml")),
        "xl/workbook.xml": (
            f'{XML}<workbook xmlns="{S_NS}" xmlns:r="{DOC_REL}"><sheets>{listed}</sheets>'
            "</workbook>"
        ),
    }
    if shared_strings:
        links.append(("rIdS", "sharedStrings", "sharedStrings.xml"))
        kinds["xl/sharedStrings.xml"] = "spreadsheetml.sharedStrings"
        members["xl/sharedStrings.xml"] = shared_strings
    members["[Content_Types].xml"] = _content_types(**kinds)
    members["xl/_rels/workbook.xml.rels"] = _relationships(*links)
    size = f'<dimension ref="{dimension}"/>' if dimension else ""
    for name, rows in zip(names, sheets, strict=True):
        members[name] = (
            f'{XML}{doctype}<worksheet xmlns="{S_NS}">{size}<sheetData>{rows}</sheetData>'
            "</worksheet>"
        )
    return zipped(members)


def with_members(package: bytes, extra: dict[str, bytes]) -> bytes:
    """``package`` (a zip) with the ``extra`` members added."""
    with zipfile.ZipFile(io.BytesIO(package)) as archive:
        members: dict[str, bytes | str] = {name: archive.read(name) for name in archive.namelist()}
    return zipped({**members, **extra})


def declaring(package: bytes, member: str, size: int) -> bytes:
    """``package`` with ``member``'s headers, local and central, declaring ``size`` bytes
    inflated: a lie, as its data inflates to what it did."""
    patched = bytearray(package)
    with zipfile.ZipFile(io.BytesIO(package)) as archive:
        local = archive.getinfo(member).header_offset
    central = package.rindex(member.encode()) - 46  # the central directory comes last
    assert package[local : local + 4] == b"PK\x03\x04"
    assert package[central : central + 4] == b"PK\x01\x02"
    patched[local + 22 : local + 26] = size.to_bytes(4, "little")
    patched[central + 24 : central + 28] = size.to_bytes(4, "little")
    return bytes(patched)


def with_zeros(name: str, **members: int) -> bytes:
    """A small DOCX or XLSX (by ``name``'s suffix) with extra members ``media/<key>.bin``, each
    of that many zero bytes (a thousandth of it deflated). No part links to them: only the
    archive check reads them."""
    package = (
        docx_with_body(PARAGRAPH) if name.endswith(".docx") else xlsx_with_sheets(sheet_rows(2))
    )
    return with_members(package, {f"media/{key}.bin": bytes(n) for key, n in members.items()})


def pdf_of_blank_pages(count: int) -> bytes:
    writer = PdfWriter()
    for _ in range(count):
        writer.add_blank_page(width=612, height=792)
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()
