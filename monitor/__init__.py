"""The inference box: llama-server, its profiles and router, model files, telemetry, and the staff pages."""
