"""``ragtime bench safety``: the injection screen and the PII redaction on labelled sets."""

from bench.suites.safety.command import register, run

__all__ = ["register", "run"]
