"""Bench fixtures: the app tests' seeded data dir (part of the demo corpus) and API key."""

from tests.app.conftest import api_key, corpus_dir, seeded_data_dir

__all__ = ["api_key", "corpus_dir", "seeded_data_dir"]
