from celery import shared_task
from django.conf import settings

from monitor import downloads


@shared_task(acks_late=True)
def download_model(job_id: int) -> str:
    return downloads.run_job(job_id).status


@shared_task
def resume_stalled_downloads(older_than_s: float | None = None) -> list[int]:
    """Re-queue downloads whose worker died mid-way; each resumes from its partial file."""
    stalled = downloads.stalled_jobs(settings.DOWNLOAD_STALL_S if older_than_s is None else older_than_s)
    for job_id in stalled:
        downloads.restart_job(job_id)
        download_model.delay(job_id)
    return stalled


@shared_task
def run_self_test(profile_name: str | None = None) -> int:
    """The dashboard's one-click self-test; the result row's id."""
    import asyncio

    from monitor.selftest import run_self_test as self_test

    return asyncio.run(self_test(profile_name)).id


@shared_task
def prune_metric_history() -> int:
    """Drop dashboard history rows older than MONITOR_HISTORY_HOURS."""
    from datetime import timedelta

    from django.utils import timezone

    from monitor.models import MetricMinute

    cutoff = timezone.now() - timedelta(hours=settings.MONITOR_HISTORY_HOURS)
    return MetricMinute.objects.filter(at__lt=cutoff).delete()[0]
