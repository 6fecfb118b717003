"""Model downloads: resumable, hashed while streaming, verified, moved in atomically.

A job is created by :mod:`monitor.catalog.download_jobs`; ``run_job`` (called by the
Celery task on that node's own queue, so on that node) streams each part to
``<models>/.partial/``, hashing as it writes, resumes with an HTTP Range request from
whatever an earlier attempt left there, and moves the files into the node's models
directory only when every part is complete, matches its expected SHA256 and parses as
GGUF. Every failure ends the job with a reason.
"""

from __future__ import annotations

import hashlib
import http.client
import logging
import os
import shutil
import ssl
import time
from pathlib import Path
from urllib.parse import urljoin, urlsplit

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext as _

from monitor import timeline
from monitor.catalog.blocks import CHUNK, BlockPipeline
from monitor.catalog.download_jobs import DownloadError, is_here, models_dir
from monitor.catalog.gguf_header import HeaderError, read_header
from monitor.models import DownloadJob, Event

log = logging.getLogger(__name__)
PROGRESS_EVERY_S = 1.0
DISK_MARGIN = 512 * 1024 * 1024


class Cancelled(Exception):
    pass


class TransientError(Exception):
    """The connection broke or stalled: the bytes so far are kept and a retry resumes."""


# http.client rather than httpx for the body: it reads straight into large buffers,
# about four times faster than httpx's streaming on this path (see bench/download_bench.py).
TRANSIENT = (OSError, http.client.HTTPException, TransientError)


def partial_dir() -> Path:
    return models_dir() / ".partial"


class _Progress:
    """Writes progress to the job at most every PROGRESS_EVERY_S and notices cancellation."""

    def __init__(self, job: DownloadJob, done_before: int):
        self.job = job
        self.done = done_before
        self.window_start = time.monotonic()
        self.window_bytes = 0
        self.last_write = 0.0

    def add(self, count: int) -> None:
        self.done += count
        self.window_bytes += count
        now = time.monotonic()
        if now - self.last_write >= PROGRESS_EVERY_S:
            self.flush(now)

    def flush(self, now: float | None = None) -> None:
        now = now or time.monotonic()
        elapsed = now - self.window_start
        rate = self.window_bytes / elapsed if elapsed > 0 else 0
        self.last_write = now
        updated = DownloadJob.objects.filter(id=self.job.id, status=DownloadJob.Status.RUNNING).update(
            bytes_done=self.done, rate_bps=rate, heartbeat_at=timezone.now()
        )
        if not updated:
            raise Cancelled()
        if elapsed > 5:  # a sliding window, so the rate follows the current speed
            self.window_start, self.window_bytes = now, 0


def _partial_path(job: DownloadJob, part: dict) -> Path:
    return partial_dir() / f"{job.id}-{part['name']}.part"


def _hash_existing(path: Path, digest) -> int:
    """Feed what an earlier attempt wrote into the digest; returns its length."""
    if not path.exists():
        return 0
    size = 0
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
            size += len(block)
    return size


def _open(url: str, headers: dict[str, str], redirects: int = 5) -> tuple[http.client.HTTPResponse, str]:
    """GET ``url`` following redirects; returns the response and the final URL."""
    for _hop in range(redirects + 1):
        parts = urlsplit(url)
        port = parts.port
        if parts.scheme == "https":
            connection = http.client.HTTPSConnection(
                parts.hostname, port, timeout=settings.DOWNLOAD_READ_TIMEOUT_S, context=ssl.create_default_context()
            )
        else:
            connection = http.client.HTTPConnection(parts.hostname, port, timeout=settings.DOWNLOAD_READ_TIMEOUT_S)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        connection.request("GET", target, headers={"User-Agent": "qwenweb", **headers})
        response = connection.getresponse()
        if response.status in (301, 302, 303, 307, 308) and response.getheader("location"):
            url = urljoin(url, response.getheader("location"))
            response.close()
            connection.close()
            continue
        return response, url
    raise DownloadError(_("Too many redirects for %(url)s.") % {"url": url[:200]})


def _download_part(job: DownloadJob, part: dict, progress: _Progress) -> str:
    """Stream one part to its partial file (resuming), return its SHA256."""
    path = _partial_path(job, part)
    digest = hashlib.sha256()
    offset = _hash_existing(path, digest)
    headers = {"Range": f"bytes={offset}-"} if offset else {}
    response, url = _open(part["url"], headers)
    with response:
        if response.status == 416 and offset:
            return digest.hexdigest()  # asked past the end: the partial file is already complete
        if response.status not in (200, 206):
            raise DownloadError(
                _("The server answered %(status)d %(reason)s for %(url)s.")
                % {"status": response.status, "reason": response.reason, "url": url[:200]}
            )
        content_type = (response.getheader("content-type") or "").lower()
        if content_type.startswith(("text/html", "application/xhtml")):
            raise DownloadError(
                _(
                    "The server sent a web page, not a model file (%(url)s). Check that the URL is a direct download link."
                )
                % {"url": part["url"][:200]}
            )
        if response.status == 200 and offset:
            # The server ignored the Range header: start this part again.
            progress.done -= offset
            digest, offset = hashlib.sha256(), 0
        length = response.getheader("content-length")
        expected_size = offset + int(length) if length and length.isdigit() else None
        part["size"] = expected_size
        free = shutil.disk_usage(partial_dir()).free
        if expected_size is not None and expected_size - offset + DISK_MARGIN > free:
            raise DownloadError(
                _("Not enough free disk space: %(need).1f GB needed, %(free).1f GB free.")
                % {"need": (expected_size - offset + DISK_MARGIN) / 1e9, "free": free / 1e9}
            )
        blocks = BlockPipeline(path, "ab" if offset else "wb", digest)
        written = offset
        try:
            while True:
                buffer = blocks.free.get()
                size = response.readinto(buffer)
                if not size:
                    blocks.free.put(buffer)
                    break
                if written == 0 and not b"GGUF".startswith(bytes(buffer[: min(size, 4)])):
                    raise DownloadError(
                        _("%(name)s is not a GGUF file (it does not start with the GGUF signature).")
                        % {"name": part["name"]}
                    )
                blocks.put(buffer, size)
                written += size
                progress.add(size)
        except TimeoutError as error:
            raise TransientError("timeout") from error
        finally:
            blocks.close()
        if blocks.failure:
            raise DownloadError(_("Writing the file failed: %(reason)s.") % {"reason": blocks.failure[0]})
        if expected_size is not None and written != expected_size:
            # The connection closed early: keep what came, a retry resumes.
            raise TransientError(f"ended at {written} of {expected_size} bytes")
    return digest.hexdigest()


def _verify(job: DownloadJob, part: dict, actual_sha256: str) -> None:
    path = _partial_path(job, part)
    if part["sha256"] and actual_sha256 != part["sha256"]:
        path.unlink(missing_ok=True)
        raise DownloadError(
            _("%(name)s does not match the expected SHA256 (got %(actual)s). The file was discarded.")
            % {"name": part["name"], "actual": actual_sha256}
        )
    try:
        read_header(path)
    except HeaderError as error:
        path.unlink(missing_ok=True)
        raise DownloadError(
            _("%(name)s is not a usable GGUF file: %(reason)s.") % {"name": part["name"], "reason": error}
        ) from error


def run_job(job_id: int) -> DownloadJob:
    """Download every part of the job; resumes whatever an earlier attempt left."""
    job = DownloadJob.objects.select_related("node").get(id=job_id)
    if job.status not in (DownloadJob.Status.QUEUED, DownloadJob.Status.RUNNING):
        return job
    if not is_here(job.node):  # only its node's worker may fill its node's folder
        log.error("download %s is for node %s, not this one (%s)", job.id, job.node, settings.NODE_NAME)
        return job
    partial_dir().mkdir(parents=True, exist_ok=True)
    DownloadJob.objects.filter(id=job.id).update(
        status=DownloadJob.Status.RUNNING, heartbeat_at=timezone.now(), error=""
    )
    progress = _Progress(job, _bytes_on_disk(job))
    try:
        hashes = [_download_with_retries(job, part, progress) for part in job.parts]
        progress.flush()
        DownloadJob.objects.filter(id=job.id).update(
            status=DownloadJob.Status.VERIFYING,
            parts=job.parts,
            bytes_total=sum(p["size"] or 0 for p in job.parts) or None,
        )
        for part, digest in zip(job.parts, hashes, strict=True):
            _verify(job, part, digest)
            part["sha256_actual"] = digest
        for part in job.parts:
            os.replace(_partial_path(job, part), models_dir() / part["name"])
        _finish(job, DownloadJob.Status.DONE, parts=job.parts)
    except Cancelled:
        _discard(job)
        _finish(job, DownloadJob.Status.CANCELLED)
    except DownloadError as error:
        if not isinstance(error.__cause__, TRANSIENT):
            _discard(job)  # nothing half-written stays behind; a broken connection keeps its bytes to resume
        _finish(job, DownloadJob.Status.FAILED, error=str(error))
    return DownloadJob.objects.select_related("node").get(id=job.id)


def _bytes_on_disk(job: DownloadJob) -> int:
    paths = [_partial_path(job, part) for part in job.parts]
    return sum(path.stat().st_size for path in paths if path.exists())


def _download_with_retries(job: DownloadJob, part: dict, progress: _Progress) -> str:
    for attempt in range(1, settings.DOWNLOAD_ATTEMPTS + 1):
        try:
            return _download_part(job, part, progress)
        except TRANSIENT as error:
            log.warning("download %s: %s (attempt %d)", job.id, error, attempt)
            progress.done = _bytes_on_disk(job)
            if attempt == settings.DOWNLOAD_ATTEMPTS:
                raise DownloadError(_describe_transport(error, part)) from error
            time.sleep(min(2**attempt, 10))
    raise AssertionError("unreachable")


def _describe_transport(error: Exception, part: dict) -> str:
    if isinstance(error, TimeoutError) or (isinstance(error, TransientError) and str(error) == "timeout"):
        return _("The server stopped answering while sending %(name)s. Start the download again to resume it.") % {
            "name": part["name"]
        }
    return _("The connection broke while downloading %(name)s (%(reason)s). Start the download again to resume it.") % {
        "name": part["name"],
        "reason": str(error)[:200],
    }


def _discard(job: DownloadJob) -> None:
    for part in job.parts:
        _partial_path(job, part).unlink(missing_ok=True)


def _finish(job: DownloadJob, status: str, *, error: str = "", parts: list | None = None) -> None:
    fields = {"status": status, "error": error, "finished_at": timezone.now(), "rate_bps": 0}
    if parts is not None:
        fields["parts"] = parts
    DownloadJob.objects.filter(id=job.id).update(**fields)
    node = job.node.name if job.node is not None else ""
    if status == DownloadJob.Status.DONE:
        timeline.record(
            Event.Kind.DOWNLOAD_FINISHED,
            _("Download of %(name)s finished.") % {"name": job.file_name},
            node=node,
            job=job.id,
        )
    elif status == DownloadJob.Status.FAILED:
        timeline.record(
            Event.Kind.DOWNLOAD_FAILED,
            _("Download of %(name)s failed: %(error)s") % {"name": job.file_name, "error": error},
            level=Event.Level.ERROR,
            node=node,
            job=job.id,
        )
