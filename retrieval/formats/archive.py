"""Zip packages (DOCX, XLSX) measured before a library inflates them: ``check_archive``.

python-docx and openpyxl inflate their package's members with ``zipfile``, which inflates a
member up to the size its header declares. So each member's declared size is checked against
``max_member_bytes`` and their sum against ``max_inflated_bytes`` first (cheap: a zip bomb that
declares its size is refused without inflating anything). Then each member is inflated once,
streaming and counting, up to what is left of the limits rather than its declared size: a
header that lies about its size is caught too, and memory holds one read's worth at a time.
Office packages use only the stored and deflate methods; a member compressed otherwise is
refused, as bzip2 and LZMA inflate without a bound on one read's output.
"""

from __future__ import annotations

import copy
import io
import zipfile

from retrieval.errors import UnreadableDocument
from retrieval.formats.limits import ParseLimits

_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
_READ_SIZE = 64 * 1024


def _inflated_size(archive: zipfile.ZipFile, info: zipfile.ZipInfo, budget: int) -> int:
    """What ``info`` inflates to, counted to just past ``budget`` whatever its header says."""
    probe = copy.copy(info)
    # zipfile cuts the stream at the size it is told, and fails its CRC there: tell it a size
    # past where this loop stops, so that the stream's own end or the budget stops first
    probe.file_size = budget + _READ_SIZE + 1
    size = 0
    with archive.open(probe) as member:
        while size <= budget and (piece := member.read(_READ_SIZE)):
            size += len(piece)
    return size


def check_archive(data: bytes, limits: ParseLimits) -> None:
    """``LimitExceeded`` if a member of the zip archive ``data``, or all of them together,
    inflate to more than ``limits`` allow; ``UnreadableDocument`` for a compression method
    that Office files do not use. Errors of a broken archive come from ``zipfile``."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        members = archive.infolist()
        for info in members:
            if info.compress_type not in _METHODS:
                raise UnreadableDocument(
                    f"{info.filename}: compression method {info.compress_type}, "
                    "which Office files do not use"
                )
            limits.check("max_member_bytes", info.file_size, what=f"{info.filename} declares ")
        declared = sum(info.file_size for info in members)
        limits.check("max_inflated_bytes", declared, what="the members declare ")
        total = 0
        for info in members:
            budget = min(limits.max_member_bytes, limits.max_inflated_bytes - total)
            size = _inflated_size(archive, info, budget)
            limits.check(
                "max_member_bytes", size, what=f"{info.filename} inflates to ", at_least=True
            )
            total += size
            limits.check("max_inflated_bytes", total, what="the members inflate to ", at_least=True)
