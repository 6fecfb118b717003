"""What a patch declares it touches, and the check that the installed libraries still have it.

A patch names, per library, the version it was written for and the names it reads or replaces
(``module:attribute.attribute``). Some are attributes an object gets only once it runs (Twisted's
``HTTPChannel._path``, set as the request line is parsed): those are named by the function that
sets or reads them, ``module:Class.method>name``, and checked in that function's compiled names.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from importlib import metadata


class PatchRefused(SystemExit):
    """A patch does not fit the installed library: the process must not start. A SystemExit, so
    that no handler of exceptions on the way (Celery's signal dispatch logs and goes on) keeps it
    running; the message is what the process prints as it exits."""


@dataclass(frozen=True)
class Patch:
    name: str
    # {distribution: the version the patch was written for}
    versions: dict[str, str]
    # {distribution: names the patch touches in it}
    touches: dict[str, tuple[str, ...]]

    def check(self) -> None:
        """Raises PatchRefused, naming the library and its installed version, if anything differs."""
        for library, written_for in self.versions.items():
            installed = installed_version(library)
            if installed != written_for:
                raise PatchRefused(
                    f"qwenweb's patch {self.name!r} was written for {library} {written_for}, but {library} "
                    f"{installed} is installed: review qwenweb/patches/{self.name}.py against it "
                    f"(or install the version requirements.txt pins)"
                )
            for name in self.touches.get(library, ()):
                if not exists(name):
                    raise PatchRefused(
                        f"qwenweb's patch {self.name!r} needs {name} in {library} {installed}, "
                        f"which does not have it: review qwenweb/patches/{self.name}.py"
                    )


def installed_version(library: str) -> str:
    try:
        return metadata.version(library)
    except metadata.PackageNotFoundError:
        return "(not installed)"


def distributions_of(module: str) -> list[str]:
    """The installed distributions that provide top-level module ``module`` (twisted: Twisted)."""
    return metadata.packages_distributions().get(module, [module])


def exists(name: str) -> bool:
    """Whether ``module:a.b`` resolves, or ``module:a.b>name`` is among the names function a.b uses."""
    module_name, _colon, rest = name.partition(":")
    path, _arrow, used = rest.partition(">")
    try:
        target = importlib.import_module(module_name)
        for part in path.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError):
        return False
    if not used:
        return True
    code = getattr(target, "__code__", None)
    return code is not None and used in code.co_names
