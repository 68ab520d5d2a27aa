"""Protocol-faithful fake servers (SGLang, OpenAI-compatible) run in a thread, for tests only."""
