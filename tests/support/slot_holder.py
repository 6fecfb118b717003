"""A process that takes one slot of a pool's fair queue and keeps it until it is killed (a test's
stand-in for a web process killed mid-answer): ``python -m tests.support.slot_holder POOL NODE...``.
Prints ``held`` once it holds the slot."""

from __future__ import annotations

import asyncio
import os
import sys

import django


async def hold(pool: str, nodes: list[str]) -> None:
    from monitor.serving.queue import FairQueue  # needs the app registry

    await FairQueue(pool).acquire("killed-holder", nodes)
    print("held", flush=True)
    await asyncio.Event().wait()


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "qwenweb.settings")
    django.setup()
    asyncio.run(hold(sys.argv[1], sys.argv[2:]))


if __name__ == "__main__":
    main()
