"""``ragtime bench ceiling``: ragtime's ceiling as a share of the bare floor's, by wrk."""

from bench.suites.ceiling.command import register, run

__all__ = ["register", "run"]
