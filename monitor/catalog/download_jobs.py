"""Download jobs: what an admin asks for, checked, and the job's life outside the transfer itself.

``create_job`` validates a URL (a plain ``.gguf`` file name, so nothing can land outside the models
directory; a shard set expands to all its parts) and the expected SHA256s, for one node, and refuses
a file that node already holds; ``cancel_job``, ``restart_job`` and ``stalled_jobs`` move a job
between states. The transfer is :mod:`monitor.catalog.downloads`.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from urllib.parse import unquote, urlsplit

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from monitor.models import DownloadJob, Node

SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
SHARD_RE = re.compile(r"^(?P<stem>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,200}\.gguf$")


class DownloadError(Exception):
    """Ends the job; the message is shown to the admin."""


def models_dir() -> Path:
    return Path(settings.MODELS_DIR)


def safe_file_name(url: str) -> str:
    """The file name a URL points to, refused if it could leave the models directory."""
    raw = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    if not NAME_RE.match(raw) or ".." in raw:
        raise DownloadError(
            _("The URL must end in a plain file name ending in .gguf (letters, digits, '.', '_', '-'); got %(name)r.")
            % {"name": raw[:100]}
        )
    return raw


def is_here(node: Node | None) -> bool:
    """The node this process runs on (None: the main box's own, which a download without a node meant)."""
    return (
        settings.NODE_NAME == node.name
        if node is not None
        else not Node.objects.filter(is_local=False, name=settings.NODE_NAME).exists()
    )


def files_on(node: Node | None) -> dict[str, str]:
    """The model files a node holds, name -> SHA256 ("" where not known): this process's own node from
    its models folder (exact), another from what it registered (its start, and each download since)."""
    if not is_here(node):
        return node.registered_models
    known = node.registered_models if node is not None else {}
    folder = models_dir()
    names = (str(path.relative_to(folder)) for path in folder.rglob("*.gguf")) if folder.is_dir() else ()
    return {name: known.get(name, "") for name in names if ".partial" not in Path(name).parts}


def create_job(user, url: str, expected_sha256: str = "", node: Node | None = None) -> DownloadJob:
    """A download of ``url`` to ``node`` (None: this box's own); DownloadError says why not."""
    url = (url or "").strip()
    parsed = urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise DownloadError(_("Give an http:// or https:// URL."))
    name = safe_file_name(url)
    hashes = [item.strip().lower() for item in (expected_sha256 or "").replace(",", " ").split() if item.strip()]
    if any(not SHA256_RE.match(item) for item in hashes):
        raise DownloadError(_("An expected SHA256 is 64 hexadecimal characters."))
    shard = SHARD_RE.match(name)
    if shard:
        count = int(shard.group("count"))
        names = [f"{shard.group('stem')}-{index:05d}-of-{count:05d}.gguf" for index in range(1, count + 1)]
        base = url[: url.rindex(urlsplit(url).path.rsplit("/", 1)[-1])]
        suffix = "?" + parsed.query if parsed.query else ""
        urls = [base + item + suffix for item in names]
    else:
        names, urls = [name], [url]
    if hashes and len(hashes) != len(names):
        raise DownloadError(
            ngettext(
                "Give one SHA256 per file: this set has %(count)d file.",
                "Give one SHA256 per file: this set has %(count)d files.",
                len(names),
            )
            % {"count": len(names)}
        )
    present = files_on(node)
    for item in names:
        if item in present and is_here(node):
            raise DownloadError(_("%(name)s is already in the models directory.") % {"name": item})
        if item in present:
            raise DownloadError(_("%(name)s is already on %(node)s.") % {"name": item, "node": node.name})
    if DownloadJob.objects.filter(status__in=DownloadJob.ACTIVE, url=url, node=node).exists():
        if node is None or is_here(node):
            raise DownloadError(_("This URL is already being downloaded."))
        raise DownloadError(_("This URL is already being downloaded to %(node)s.") % {"node": node.name})
    parts = [
        {"url": u, "name": n, "sha256": hashes[i] if hashes else "", "size": None}
        for i, (u, n) in enumerate(zip(urls, names, strict=True))
    ]
    return DownloadJob.objects.create(created_by=user, url=url, parts=parts, node=node)


def first_source(name: str) -> tuple[str, str] | None:
    """Where a model file first came from, for another node to fetch the same: (URL, the SHA256 of each
    part as verified then, space-separated); None when no finished download brought it."""
    for job in DownloadJob.objects.filter(status=DownloadJob.Status.DONE).order_by("created_at"):
        if any(part.get("name") == name for part in job.parts):
            return job.url, " ".join(part.get("sha256_actual") or "" for part in job.parts).strip()
    return None


def cancel_job(job_id: int) -> None:
    DownloadJob.objects.filter(id=job_id, status__in=DownloadJob.ACTIVE).update(status=DownloadJob.Status.CANCELLING)


def stalled_jobs(older_than_s: float) -> list[int]:
    """Jobs whose worker stopped reporting (it was killed): to be resumed."""
    cutoff = timezone.now() - timedelta(seconds=older_than_s)
    return list(
        DownloadJob.objects.filter(status=DownloadJob.Status.RUNNING, heartbeat_at__lt=cutoff).values_list(
            "id", flat=True
        )
    )


def restart_job(job_id: int) -> DownloadJob:
    """Queue a failed or stalled job again; it resumes from the bytes it has."""
    DownloadJob.objects.filter(id=job_id).exclude(status=DownloadJob.Status.DONE).update(
        status=DownloadJob.Status.QUEUED, error="", finished_at=None
    )
    return DownloadJob.objects.select_related("node").get(id=job_id)
