"""Talking to llama-server: the one client (``client``) over the one transport (``wire``: HTTP/1.1
written by h11 and read by llhttp over ``connection``'s socket, TLS in memory for https://), its
errors, SSE parsing, the local binary, what a server serves."""
