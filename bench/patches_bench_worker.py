"""An idle Celery worker for bench/patches_bench.py (not the product): `python patches_bench_worker.py VARIANT`.

The product's Celery app and worker options (solo pool; no gossip, mingle
or heartbeat), consuming a queue of its own that nobody sends to, its broker connection either:

- ``kombu``: kombu's Redis transport as it comes;
- ``options``: the same with the documented transport options a product worker gets (`qwenweb.celery`);
- ``product``: a product worker's, those options and the broker patch (`qwenweb.patches.broker`).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "qwenweb.settings")


def main() -> None:
    variant = sys.argv[1]
    import django

    django.setup()
    from celery.signals import celeryd_init

    from qwenweb.celery import app

    @celeryd_init.connect(weak=False)
    def undo(conf, **_kwargs) -> None:  # runs after the product's own handler
        if variant != "product":
            conf.broker_transport = "redis"
        if variant == "kombu":
            conf.broker_transport_options = {}
        logging.getLogger(__name__).warning(
            "bench worker %s: transport %s, options %s", variant, conf.broker_transport, conf.broker_transport_options
        )

    quiet = ["--without-gossip", "--without-mingle", "--without-heartbeat"]
    queue = ["--queues", f"patches-bench-{variant}", "--hostname", f"bench-{variant}@%h"]
    app.worker_main(["worker", "--pool", "solo", "--loglevel", "WARNING", *quiet, *queue])


if __name__ == "__main__":
    main()
