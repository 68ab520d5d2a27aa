"""The chunk store: collections served from versioned snapshots, written and published whole."""
