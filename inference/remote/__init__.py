"""Remote generation over HTTP: SGLang and OpenAI-compatible servers, their endpoints and faults."""
