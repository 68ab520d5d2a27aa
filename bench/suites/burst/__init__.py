"""``ragtime bench burst``: bursts of simultaneous questions, and users at fixed budgets."""

from bench.suites.burst.command import register, run

__all__ = ["register", "run"]
