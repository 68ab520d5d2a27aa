"""Who may ask: scoped API keys (``auth``), where they are kept (``stores``: SQLite, or
PostgreSQL in ``postgres``), and per-key rate limits (``ratelimit``)."""
