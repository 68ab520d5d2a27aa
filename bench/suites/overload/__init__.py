"""``ragtime bench overload``: goodput at twice the engine's capacity, an engine that slows down
without notice, and mixed budgets with the engine's priority scheduling off and on."""

from bench.suites.overload.command import register, run

__all__ = ["register", "run"]
