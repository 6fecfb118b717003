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


@shared_task(ignore_result=True)
def watchdog() -> list[str]:
    """Health of llama-server and its profiles; restarts what died (see monitor.watchdog)."""
    from monitor.watchdog import run_watchdog

    return run_watchdog()


@shared_task
def load_profile(profile_id: int) -> dict:
    """Load a profile's saved settings (beside the live ones); the result for the admin page."""
    import asyncio

    from monitor.llama_client import LlamaClient
    from monitor.models import ServerProfile
    from monitor.switching import LoadFailed
    from monitor.switching import load_profile as load

    profile = ServerProfile.objects.get(pk=profile_id)

    async def main() -> dict:
        client = LlamaClient()
        try:
            seconds = await load(profile, client)
            return {"ok": True, "load_s": seconds}
        except LoadFailed as error:
            return {"ok": False, "error": str(error)}
        finally:
            await client.aclose()

    return asyncio.run(main())


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
