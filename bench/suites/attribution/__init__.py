"""``ragtime bench attribution``: citation attribution on a labelled set and on a server."""

from bench.suites.attribution.command import register, run

__all__ = ["register", "run"]
