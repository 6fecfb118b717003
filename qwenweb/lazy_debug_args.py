"""autobahn's debug-log arguments formatted only when a debug line is written.

autobahn (Daphne's WebSocket protocol) logs each frame it sends at debug level, and builds the
line's arguments before the call: ``hltype(self.sendData)``, ``hlval(self.peer)`` and
``hlval(len(data))`` inspect the method, join its qualified name and colour three strings with
click, for every frame of every answer, though the debug level is off and the line is dropped.
That was about a sixth of the web process's Python work per streamed frame (bench/cpu_bench.py,
``chat_web_cpu_s_per_1k_tokens``). Here both helpers, as autobahn's protocol modules call them,
return a placeholder that formats the same text if and when a log line is written.
"""

from __future__ import annotations

from autobahn import util
from autobahn.twisted import websocket as twisted_websocket
from autobahn.websocket import protocol

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


def install() -> None:
    for module in _MODULES:
        for name in ("hltype", "hlval"):
            if getattr(module, name, None) is getattr(util, name):  # not installed yet
                setattr(module, name, _deferred(name))
