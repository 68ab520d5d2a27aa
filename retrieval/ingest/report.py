"""What an ingest tells: its report at the end, and how far it is after each file."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class IngestReport:
    files: int = 0  # files embedded and stored (added + changed)
    chunks: int = 0  # chunks embedded
    failures: list[tuple[str, str]] = field(default_factory=list)  # (source, reason)
    skipped: list[str] = field(default_factory=list)  # unsupported suffix
    duplicates: int = 0  # chunks not stored again: their text was already taken
    copies: list[tuple[str, str]] = field(default_factory=list)  # (copy, the source it copies)
    # e-mail attachments stored, (source, its message); their chunks are counted in ``chunks``
    attachments: list[tuple[str, str]] = field(default_factory=list)
    added: list[str] = field(default_factory=list)  # new sources
    changed: list[str] = field(default_factory=list)  # sources whose content hash changed
    unchanged: list[str] = field(default_factory=list)  # carried over, not embedded again
    removed: list[str] = field(default_factory=list)  # sources gone from the ingested folder
    snapshot: str | None = None  # the version published, None when nothing changed

    def summary(self) -> str:
        return (
            f"{len(self.added)} added, {len(self.changed)} changed, "
            f"{len(self.unchanged)} unchanged, {len(self.removed)} removed"
        )


@dataclass(frozen=True)
class IngestProgress:
    """How far an ingest is, after one more file."""

    files_done: int  # ingested, failed or skipped
    files_total: int
    chunks: int  # embedded so far
    elapsed_s: float
    bytes_done: int
    bytes_total: int

    @property
    def chunks_per_s(self) -> float:
        return self.chunks / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        """Seconds left, from the bytes read so far; None until there is a rate."""
        if self.bytes_done <= 0 or self.elapsed_s <= 0:
            return None
        return self.elapsed_s * max(self.bytes_total - self.bytes_done, 0) / self.bytes_done
