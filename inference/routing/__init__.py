"""Model routing: a pool and an endpoint per request, by question classifier, load and budget."""
