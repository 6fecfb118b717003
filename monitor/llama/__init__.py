"""Talking to llama-server: the one client, its errors, SSE parsing, the local binary, what a server serves."""
