"""autobahn's per-frame debug-log arguments (qwenweb/patches/lazy_debug_args.py): not built while no debug line
is written, and the same text as autobahn's own helpers when one is."""

from __future__ import annotations

from string import Formatter

from autobahn import util
from autobahn.twisted import websocket as twisted_websocket
from autobahn.websocket import protocol

from qwenweb.patches import lazy_debug_args


def test_the_frame_log_arguments_are_built_only_when_written(monkeypatch):
    for module in (protocol, twisted_websocket):
        for name in ("hltype", "hlval"):
            monkeypatch.setattr(module, name, getattr(module, name))  # put back after the test
    lazy_debug_args.apply()
    styled = []
    real_hl = util.hl
    monkeypatch.setattr(util, "hl", lambda text, **kwargs: styled.append(text) or real_hl(text, **kwargs))
    method = protocol.WebSocketProtocol.sendData
    func, size = protocol.hltype(method), protocol.hlval(1234, color="white")
    peer = twisted_websocket.hlval("tcp4:127.0.0.1:5000")
    assert styled == []  # nothing formatted: what sendData pays per frame while debug logging is off
    assert str(func) == util.hltype(method)
    assert f"{size}" == util.hlval(1234, color="white")
    assert Formatter().format("{peer}", peer=peer) == util.hlval("tcp4:127.0.0.1:5000")  # as Twisted's log does
    assert "127.0.0.1:5000" in str(peer) and styled
