"""``ragtime bench peers``: ragtime beside the same-work floor and the Haystack peer, in one run
with the same clients (the bench's for first tokens, wrk for ceilings)."""

from bench.suites.peers.command import register, run

__all__ = ["register", "run"]
