"""One OpenAI-compatible LLM client: configuration, retries, concurrency, cost, record/replay."""
