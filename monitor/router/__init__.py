"""Keeping llama-server's router alive: the supervisor process, the watchdog, the router's log."""
