"""Every change this project makes inside a library's internals, in one place (docs/patches.md).

A library is used through its documented extension points; where only its internals will do, the
patch is a module here. Each declares what it touches (``PATCH``: the library versions it was
written for and the private names it reads or replaces) and applies itself (``apply()``).
``install(process)`` checks every patch that process needs against the installed libraries
before it applies any, and refuses to start (``PatchRefused``, naming the library and its
installed version) when one does not match: a library upgraded under a patch stops the process
at start-up, never on some later request.

- the web process (`qwenweb.asgi`, which `qwenweb.serve` has Daphne load): ``daphne_body_cap``,
  ``direct_writes``, ``api_handler``;
- a Celery worker (`qwenweb.celery`): ``broker``.
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

from qwenweb.patches.guard import Patch, PatchRefused, distributions_of, installed_version

__all__ = ["PROCESSES", "Patch", "PatchRefused", "install", "patches_of"]

# The patches each kind of process installs, by module name (imported only where needed: a worker
# never loads Twisted).
PROCESSES = {
    "web": ("daphne_body_cap", "direct_writes", "api_handler"),
    "worker": ("broker",),
}

# Patches applied, or left out, in this process: the first install() decides, later ones change nothing.
_decided: set[str] = set()


def patches_of(process: str) -> list[ModuleType]:
    modules = []
    for name in PROCESSES[process]:
        try:
            modules.append(import_module(f"{__name__}.{name}"))
        except ImportError as error:  # a private name gone before the check could name it
            library = (error.name or "").partition(".")[0]
            versions = ", ".join(f"{lib} {installed_version(lib)}" for lib in distributions_of(library))
            raise PatchRefused(
                f"qwenweb's patch {name!r} cannot be imported ({error}; installed: {versions})"
            ) from error
    return modules


def install(process: str, *, leave_out: tuple[str, ...] = ()) -> None:
    """Check, then apply, the patches ``process`` needs; ``leave_out`` is for bench/patches_bench.py,
    which measures each patch against the same process without it."""
    modules = patches_of(process)
    for module in modules:
        module.PATCH.check()
    for module in modules:
        if module.PATCH.name in _decided:
            continue
        _decided.add(module.PATCH.name)
        if module.PATCH.name not in leave_out:
            module.apply()
