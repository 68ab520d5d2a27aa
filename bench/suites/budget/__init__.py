"""``ragtime bench budget``: the policy under faults, goodput per budget, fresh processes."""

from bench.suites.budget.command import register, run

__all__ = ["register", "run"]
