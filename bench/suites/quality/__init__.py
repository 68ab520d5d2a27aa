"""``ragtime bench quality``: what each saving of the budget engine costs in answer quality."""

from bench.suites.quality.command import register, run

__all__ = ["register", "run"]
