"""LLM layer: one async chat interface for every role, backends, request cache, retries,
structured output, and embeddings. Every call is recorded when a recorder is attached."""
