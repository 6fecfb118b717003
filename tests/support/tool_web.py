"""A web process for the tool loop's tests: the product's Daphne with the test tools installed
(tests/support/tool_provider.py), or with ``--product-tools`` the product's own (the built-ins staff
leave on and MCP). `python -m tests.support.tool_web [--product-tools] --bind HOST --port PORT`.

It runs beside the session's own web server (same database, Redis and llama-server), so it does
not sweep answers or queue slots at start as `qwenweb.serve` does: those are the other process's.
"""

from __future__ import annotations

import os
import sys

import django


def main() -> None:
    from daphne.cli import CommandLineInterface

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "qwenweb.settings")
    django.setup(set_prefix=False)
    from qwenweb.serve import daphne_argv
    from tests.support.tool_provider import install

    argv = sys.argv[1:]
    if "--product-tools" in argv:
        argv.remove("--product-tools")
    else:
        install()
    CommandLineInterface().run(daphne_argv(argv))


if __name__ == "__main__":
    main()
