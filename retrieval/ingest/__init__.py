"""Ingest: files read, chunked by model tokens, embedded, and published as a snapshot."""
