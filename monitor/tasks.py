"""Celery tasks of the inference box: thin wrappers over the services they name.

Each task's name is pinned, so messages already queued and the beat schedule keep
working whatever module the code behind it moves to.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from pathlib import Path

from asgiref.sync import async_to_sync
from celery import shared_task
from django.conf import settings
from django.utils import timezone

from monitor.catalog import download_jobs, downloads
from monitor.llama.client import run_with_client
from monitor.llama.errors import LlamaError
from monitor.maintenance.backup import create_backup, prune_backups
from monitor.models import DownloadJob, MetricMinute, ServerProfile
from monitor.nodes import model_files
from monitor.nodes.registry import local_node, node_queue, nodes_serving
from monitor.profiles import services
from monitor.profiles.errors import LoadFailed
from monitor.profiles.loading import load_profile as load
from monitor.profiles.loading import unload_profile as unload_named
from monitor.telemetry.selftest import run_self_test as self_test

log = logging.getLogger(__name__)


@shared_task(name="monitor.tasks.download_model", acks_late=True)
def download_model(job_id: int) -> str:
    """On the job's node (its own queue): the download into its models folder; then its row says the
    file is there."""
    job = downloads.run_job(job_id)
    if job.status == DownloadJob.Status.DONE:
        model_files.record_download(job)
    return job.status


def send_download(job: DownloadJob) -> None:
    """To the worker of the job's node, on that node's own queue (no node: the main box's own)."""
    download_model.apply_async((job.id,), queue=node_queue((job.node or local_node()).name))


@shared_task(name="monitor.tasks.resume_stalled_downloads")
def resume_stalled_downloads(older_than_s: float | None = None) -> list[int]:
    """Re-queue downloads whose worker died, each to its own node; each resumes from its partial file."""
    stalled = download_jobs.stalled_jobs(settings.DOWNLOAD_STALL_S if older_than_s is None else older_than_s)
    for job_id in stalled:
        send_download(download_jobs.restart_job(job_id))
    return stalled


@shared_task(name="monitor.tasks.nightly_backup", ignore_result=True)
def nightly_backup() -> str:
    """The nightly backup (QWENWEB_BACKUP_AT), keeping the newest QWENWEB_BACKUP_KEEP archives."""
    archive = create_backup(Path(settings.BACKUP_DIR))
    prune_backups(Path(settings.BACKUP_DIR), settings.BACKUP_KEEP)
    return str(archive)


@shared_task(name="monitor.tasks.load_profile")
def load_profile(profile_id: int) -> dict:
    """On a node (its own queue): load a profile's saved settings there, beside the live ones; the result
    for the admin page."""
    profile = ServerProfile.objects.get(pk=profile_id)

    async def work(client) -> dict:
        try:
            return {"ok": True, "node": settings.NODE_NAME, "load_s": await load(profile, client)}
        except LoadFailed as error:
            return {"ok": False, "node": settings.NODE_NAME, "error": str(error)}

    return run_with_client(work)


@shared_task(name="monitor.tasks.apply_profile")
def apply_profile(profile_id: int) -> dict:
    """On a node: a saved change of a profile applied there (its new revision loads beside the live one
    when it serves; a node where that fails keeps the old one and says why)."""
    if services.apply_here(ServerProfile.objects.get(pk=profile_id)):
        return load_profile(profile_id)
    return {"ok": True, "node": settings.NODE_NAME, "loaded": False}


@shared_task(name="monitor.tasks.unload_profile")
def unload_profile(name: str) -> dict:
    """On a node: unload every served revision of the profile named ``name`` there (by name: it may be
    deleted, or no longer placed there)."""
    try:
        async_to_sync(unload_named)(name)
    except LlamaError as error:
        return {"ok": False, "node": settings.NODE_NAME, "error": str(error)}
    return {"ok": True, "node": settings.NODE_NAME}


def load_on(profile: ServerProfile, names: list[str]) -> None:
    """Have each named node load the profile (a job on its own queue, after what was sent there before)."""
    for name in names:
        load_profile.apply_async((profile.pk,), queue=node_queue(name))


def on_nodes(task, profile: ServerProfile) -> list[str]:
    """Send ``task`` for the profile (its id; its name for an unload) to every node that serves it, each to
    its own queue; their names."""
    names = [node.name for node in nodes_serving(profile)]
    argument = profile.name if task is unload_profile else profile.pk
    for name in names:
        task.apply_async((argument,), queue=node_queue(name))
    return names


@shared_task(name="monitor.tasks.run_self_test")
def run_self_test(profile_name: str | None = None) -> int:
    """The dashboard's one-click self-test; the result row's id."""
    return asyncio.run(self_test(profile_name)).id


@shared_task(name="monitor.tasks.prune_metric_history")
def prune_metric_history() -> int:
    """Drop dashboard history rows older than MONITOR_HISTORY_HOURS."""
    cutoff = timezone.now() - timedelta(hours=settings.MONITOR_HISTORY_HOURS)
    return MetricMinute.objects.filter(at__lt=cutoff).delete()[0]
