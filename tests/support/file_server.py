"""A loopback HTTP server for download tests: serves real files with Range support,
and the faults a mirror can have, chosen by the first path segment:

/ok/NAME         the file, Range honoured
/slow/NAME       the same, throttled (so a download can be cancelled mid-way)
/held/NAME       the same, but it stops after HOLD_BYTES (``held`` is set) until the test calls ``release()``
                 (so a worker can be killed mid-download whatever the machine's speed); once only
/truncated/NAME  announces the full length, closes after half
/html/NAME       a login page with status 200
/missing/NAME    404
/huge/NAME       announces 10 PB
/stall/NAME      sends 1 MiB, then nothing
"""

from __future__ import annotations

import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HOLD_BYTES = 40 * 2**20


class FileServer:
    def __init__(self, root: Path):
        self.root = root
        self.held = threading.Event()  # a /held/ download stands at HOLD_BYTES
        self._gate = threading.Event()
        self.requests: list[tuple[str, str]] = []  # (path, Range header)
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                server.requests.append((self.path, self.headers.get("Range", "")))
                mode, _, name = self.path.lstrip("/").partition("/")
                name = name.split("?")[0]
                path = server.root / name
                if mode == "html":
                    return self._simple(200, b"<!DOCTYPE html><html><body>Sign in</body></html>", "text/html")
                if mode == "missing" or not path.is_file():
                    return self._simple(404, b"not found", "text/plain")
                size = path.stat().st_size
                if mode == "huge":
                    self.send_response(200)
                    self.send_header("Content-Length", str(10**16))
                    self.send_header("Content-Type", "application/octet-stream")
                    self.end_headers()
                    return
                start = 0
                match = re.match(r"bytes=(\d+)-$", self.headers.get("Range", ""))
                if match:
                    start = int(match.group(1))
                    if start >= size:
                        return self._simple(416, b"", "text/plain")
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(size - start))
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Accept-Ranges", "bytes")
                self.end_headers()
                limit = size if mode != "truncated" else max(start, size // 2)
                sent = start
                with path.open("rb") as handle:
                    handle.seek(start)
                    while sent < limit:
                        block = handle.read(min(1 << 20, limit - sent))
                        if not block:
                            break
                        try:
                            self.wfile.write(block)
                        except (BrokenPipeError, ConnectionResetError):
                            return
                        sent += len(block)
                        if mode == "slow":
                            time.sleep(0.05)  # ~20 MiB/s
                        if mode == "held" and sent >= HOLD_BYTES and not server._gate.is_set():
                            server.held.set()
                            server._gate.wait()
                            return  # the client that was held is gone by now (killed): so is this answer
                        if mode == "stall" and sent - start >= 1 << 20:
                            time.sleep(3600)
                self.close_connection = True

            def _simple(self, status, body, content_type):
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def release(self) -> None:
        """A held download's answer ends; later ones are not held."""
        self._gate.set()

    def url(self, mode: str, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{mode}/{name}"

    def close(self) -> None:
        self.release()
        self.httpd.shutdown()
        self.httpd.server_close()


if __name__ == "__main__":
    # A mirror in a process of its own (the download bench): serves the folder named on the
    # command line until stdin closes, after printing its port.
    import sys

    mirror = FileServer(Path(sys.argv[1]))
    print(mirror.port, flush=True)
    sys.stdin.read()
    mirror.close()
