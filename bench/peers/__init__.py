"""Peers: what a user would build instead of ragtime, for ``ragtime bench peers``."""
