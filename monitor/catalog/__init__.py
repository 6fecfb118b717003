"""Model files: the GGUF header reader, the registry, downloads, the VRAM planner."""
