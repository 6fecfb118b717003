"""Inference nodes: the boxes whose llama-server routers serve the profiles, and what each serves now."""
