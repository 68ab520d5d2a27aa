"""BENCHMARKS.md: its sections, the fast-path targets, and the Markdown tables of a load run."""
