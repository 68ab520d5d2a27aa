"""Embeddings: the sentence embedder, one per backend a collection was built with, and ONNX."""
