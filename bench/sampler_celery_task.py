"""The reference for sampler_bench: the same sample taken by a Celery task sent once a second
(what a beat entry per second would do), loaded into a worker with ``-I sampler_celery_task``."""

import asyncio

from celery import shared_task

_sampler = None


@shared_task(name="bench.sample_once")
def sample_once() -> float:
    from monitor.telemetry.sampler import Sampler

    global _sampler
    if _sampler is None:
        _sampler = Sampler()
    return asyncio.run(_sampler.sample())["t"]
