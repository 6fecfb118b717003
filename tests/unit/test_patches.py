"""The patches into libraries' internals (qwenweb/patches/) are checked before any is applied: a
library at another version, or without a name a patch touches, stops the process at start-up with a
message naming the library and its installed version."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from importlib import metadata
from types import SimpleNamespace

import pytest
from daphne import http_protocol
from django.core.handlers import asgi

from qwenweb import patches
from qwenweb.patches import guard

# Runs ``ENTRY`` with ``LIBRARY`` reporting another version than the one installed.
OTHER_VERSION = textwrap.dedent(
    """
    import runpy, sys
    from importlib import metadata
    library, real = sys.argv[1], metadata.version
    metadata.version = lambda name: "99.0" if name.lower() == library else real(name)
    sys.argv = sys.argv[2:]
    runpy.run_module(sys.argv[0], run_name="__main__")
    """
)


def test_every_patch_fits_the_installed_libraries():
    for process in patches.PROCESSES:
        for module in patches.patches_of(process):
            module.PATCH.check()
            assert module.PATCH.touches and set(module.PATCH.touches) <= set(module.PATCH.versions)
            assert module.__doc__ and "Gain" in module.__doc__ or "no bench figure" in module.__doc__


def test_a_private_name_gone_refuses_naming_the_library_and_its_version(monkeypatch):
    monkeypatch.delattr(http_protocol, "WebRequest")
    with pytest.raises(patches.PatchRefused) as refused:
        patches.install("web")
    message = str(refused.value)
    assert f"daphne {metadata.version('daphne')}" in message
    assert "daphne.http_protocol:WebRequest" in message and "daphne_body_cap" in message


def test_a_name_a_function_no_longer_uses_refuses(monkeypatch):
    """Daphne's factory must still build its requests from the module global the body cap replaces."""

    def build_protocol(self, addr):
        return None

    monkeypatch.setattr(http_protocol.HTTPFactory, "buildProtocol", build_protocol)
    with pytest.raises(patches.PatchRefused, match=r"daphne 4\.2\.3.*|.*HTTPFactory\.buildProtocol>WebRequest"):
        patches.install("web")


def test_another_version_refuses_naming_both(monkeypatch):
    real = guard.installed_version
    monkeypatch.setattr(guard, "installed_version", lambda name: "99.0" if name == "kombu" else real(name))
    with pytest.raises(patches.PatchRefused) as refused:
        patches.install("worker")
    assert "written for kombu 5.7.0, but kombu 99.0 is installed" in str(refused.value)


def test_a_patch_that_cannot_even_be_imported_refuses_naming_the_library(monkeypatch):
    monkeypatch.delattr(asgi, "ASGIHandler")
    monkeypatch.delitem(sys.modules, "qwenweb.patches.api_handler")
    with pytest.raises(patches.PatchRefused) as refused:
        patches.patches_of("web")
    message = str(refused.value)
    assert "ASGIHandler" in message and f"Django {metadata.version('django')}" in message


@pytest.mark.parametrize(
    ("library", "argv"),
    [
        ("twisted", ["qwenweb.serve", "--bind", "127.0.0.1", "--port", "0"]),
        ("kombu", ["celery", "-A", "qwenweb", "worker", "--pool", "solo", "--without-mingle", "--without-gossip"]),
    ],
)
def test_the_web_process_and_a_worker_refuse_to_start(library, argv):
    """For real: `qwenweb.serve` (Daphne loading the app) and a Celery worker exit at once, saying why."""
    done = subprocess.run(
        [sys.executable, "-c", OTHER_VERSION, library, *argv], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"but {library} 99.0 is installed" in done.stderr


def test_the_body_cap_never_guesses_the_path(monkeypatch):
    """Without the request line's path the limit would be a guess (the generic one): the request
    ends there instead; the check at start-up makes sure Twisted still sets it."""
    from qwenweb.patches.daphne_body_cap import BodyCappedRequest

    passed_on = []
    # Daphne's own class, which the patch extends (once installed in this process, the module's
    # WebRequest is the patch's own class).
    daphnes = BodyCappedRequest.__bases__[0]
    monkeypatch.setattr(daphnes, "gotLength", lambda self, length: passed_on.append(length))
    request = object.__new__(BodyCappedRequest)
    request.channel = SimpleNamespace()  # no _path
    with pytest.raises(AttributeError):
        request.gotLength(10)
    request.channel._path = b"/documents/upload/?x=1"
    request.gotLength(10)
    assert passed_on == [10] and request._cap_path == "/documents/upload/"
