"""Test doubles: whatever a test puts in the place of a real collaborator (servers, backends,
models, tokenizers, a collector). Tools that are not doubles live in ``tests/helpers/``."""
