"""One-off measurements behind choices BENCHMARKS.md records (``python -m bench.studies.X``)."""
