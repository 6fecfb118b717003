"""autobahn's debug-log arguments formatted only when a debug line is written.

autobahn (Daphne's WebSocket protocol) logs each frame it sends at debug level, and builds the
line's arguments before the call: ``hltype(self.sendData)``, ``hlval(self.peer)`` and
``hlval(len(data))`` inspect the method, join its qualified name and colour three strings with
click, for every frame of every answer, though the debug level is off and the line is dropped.
autobahn has no setting for it. Here both helpers, as autobahn's protocol modules call them
(module globals), return a placeholder that formats the same text if and when a line is written.

Gain, bench/patches_bench.py (three runs of 14 rounds, 2026-12-01, on two cores shared with other
work, load 9-14): within each round the web process spent 9.8 / 3.4 / 8.1 µs more per WebSocket
frame without it (131-160 µs with it), in 12 / 9 / 12 of 14 rounds, where two identical processes
differ by 2-4 µs. The smallest gain kept, and not above the noise in every run (the second here):
kept because it was positive in every run (five earlier runs, the bench then with one process more:
3.4 to 20.1 µs) and autobahn's helpers cost 7-13 µs a frame measured alone. A run where it turns
negative, as the socket session patch's did, is the cue to delete it (docs/patches.md).
"""

from __future__ import annotations

from autobahn import util
from autobahn.twisted import websocket as twisted_websocket
from autobahn.websocket import protocol

from qwenweb.patches.guard import Patch

PATCH = Patch(
    "lazy_debug_args",
    versions={"autobahn": "26.10.2"},
    touches={
        "autobahn": (
            "autobahn.util:hltype",
            "autobahn.util:hlval",
            "autobahn.websocket.protocol:hltype",
            "autobahn.websocket.protocol:hlval",
            "autobahn.websocket.protocol:WebSocketProtocol.sendData>hltype",
            "autobahn.websocket.protocol:WebSocketProtocol.sendData>hlval",
            "autobahn.twisted.websocket:hltype",
            "autobahn.twisted.websocket:hlval",
        )
    },
)

_MODULES = (protocol, twisted_websocket)


class Deferred:
    """Formats as ``helper(*args, **kwargs)`` would, when formatted."""

    __slots__ = ("helper", "args", "kwargs")

    def __init__(self, helper, args: tuple, kwargs: dict) -> None:
        self.helper = helper
        self.args = args
        self.kwargs = kwargs

    def __str__(self) -> str:
        return self.helper(*self.args, **self.kwargs)

    __repr__ = __str__

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


def _deferred(name: str):
    formats = getattr(util, name)

    def helper(*args, **kwargs) -> Deferred:
        return Deferred(formats, args, kwargs)

    helper.__name__ = name
    return helper


def apply() -> None:
    for name in ("hltype", "hlval"):
        deferred = _deferred(name)
        for module in _MODULES:
            setattr(module, name, deferred)
