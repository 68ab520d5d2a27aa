"""In-process generation: llama.cpp (its worker, prefix states, tokenizer), and the null backend."""
