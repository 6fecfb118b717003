"""Keeping llama-server's router alive: the supervisor process, its heartbeat and watchdog, the router's log."""
