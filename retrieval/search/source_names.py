"""The names a stored text goes by, from a snapshot's manifest: ``SourceNames``.

A byte-identical copy of a file holds no chunks of its own: it shares those of the file it
copies (its ``SourceRecord.duplicate_of``), so a search finds that text under both names. A hit
is named by its original and lists the copies in ``also``; a search whose ``source_prefix``
keeps a copy and not its original finds the original's chunks too (``originals_under``), and
its hits are named by the copy (the original in ``also``). An e-mail's attachment
(``thread.eml#report.pdf``) names its message (``message_of``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol


class NamedRecord(Protocol):
    """What is read of a ``snapshots.SourceRecord``."""

    @property
    def duplicate_of(self) -> str: ...

    @property
    def message(self) -> str: ...


@dataclass(frozen=True)
class SourceNames:
    """The copies of each original and the message of each attachment, of one snapshot."""

    copies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    messages: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, files: Mapping[str, NamedRecord]) -> SourceNames:
        copies: dict[str, list[str]] = {}
        for source, record in sorted(files.items()):
            if record.duplicate_of:
                copies.setdefault(record.duplicate_of, []).append(source)
        messages = {source: record.message for source, record in files.items() if record.message}
        return cls({k: tuple(v) for k, v in copies.items()}, messages)

    def originals_under(self, prefix: str) -> list[str]:
        """The originals of the copies whose name starts with ``prefix``, sorted."""
        if not prefix:
            return []
        return sorted(
            o for o, names in self.copies.items() if any(n.startswith(prefix) for n in names)
        )

    def shown(self, source: str, prefix: str = "") -> tuple[str, tuple[str, ...]]:
        """The name a hit on ``source``'s chunks is shown by (the first of ``source`` and its
        copies that starts with ``prefix``) and the other names of the same text."""
        names = (source, *self.copies.get(source, ()))
        first = next((n for n in names if n.startswith(prefix)), source)
        return first, tuple(n for n in names if n != first)

    def message_of(self, source: str) -> str:
        """The e-mail an attachment came with ("" for a source that is no attachment)."""
        return self.messages.get(source, "")
