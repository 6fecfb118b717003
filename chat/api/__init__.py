"""The OpenAI-compatible API: keys, per-key limits, the gateway to llama-server, its views and errors."""
