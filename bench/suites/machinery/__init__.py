"""``ragtime bench machinery``: what the budget and tracing machinery costs per request."""

from bench.suites.machinery.command import register, run

__all__ = ["register", "run"]
