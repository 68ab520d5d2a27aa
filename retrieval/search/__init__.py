"""Search: the FAISS index kinds, the BM25 keyword index and fusion, filters, and passages."""
