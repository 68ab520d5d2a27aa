"""Reranking: the cross-encoder, and the training of one on a collection's own chunks."""
