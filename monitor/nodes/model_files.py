"""The model files each node holds: kept in its row's facts after each download, and what a profile's
nodes lack.

A download ends on its own node (its worker), which then writes its models folder's list into its row,
so the planner, the profile form and the profile's page know at once that the file is there. The
download hashed every file while writing it, so those SHA256s go straight into the node's hash cache
(``var/model_hashes.json``): neither this refresh nor the node's next start reads the file again. A lock
file beside the cache keeps two downloads that end at once on one node from writing an older list over
a newer one.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext as _

from monitor.catalog.download_jobs import SHARD_RE, DownloadError, create_job, files_on, first_source, safe_file_name
from monitor.models import DownloadJob, Node, ServerProfile
from monitor.nodes import facts
from monitor.nodes.registry import placements_of, this_node

PRESENT, MISSING, DIFFERENT = "present", "missing", "different"


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.with_name(path.name + ".lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released as the file closes
        yield


def record_download(job: DownloadJob) -> None:
    """After a verified download on this node: its models folder's files (with SHA256) into its row."""
    node = this_node()
    if node is None:
        return
    folder, cache = Path(settings.MODELS_DIR), Path(settings.VAR_DIR) / facts.HASH_CACHE
    with _locked(cache):
        facts.remember_hashes(folder, cache, {part["name"]: part["sha256_actual"] for part in job.parts})
        models = facts.model_files(folder, cache)
        with transaction.atomic():
            node = Node.objects.select_for_update().get(pk=node.pk)
            node.facts = {**node.facts, "models": models}
            node.save(update_fields=["facts"])


def create_downloads(user, url: str, expected_sha256: str, nodes: list[Node]) -> tuple[list[DownloadJob], list[str]]:
    """A download of ``url`` to each of ``nodes`` (a job each); the jobs made, and why the others were not
    (each reason once: a bad URL is the same for every node)."""
    jobs, problems = [], []
    for node in nodes:
        try:
            jobs.append(create_job(user, url, expected_sha256, node))
        except DownloadError as error:
            problems.append(str(error))
    return jobs, list(dict.fromkeys(problems))


def source_for(name: str, url: str = "") -> tuple[str, str]:
    """(URL, expected SHA256s) to fetch the file ``name`` again for another node: the URL of its first
    download unless ``url`` is given, checked against what that download verified (or, for a single file,
    this box's copy's SHA256 when known). DownloadError when no URL is known, or the URL names another file."""
    first = first_source(name)
    url = (url or "").strip() or (first[0] if first else "")
    if not url:
        raise DownloadError(_("Where %(name)s first came from is not known here: give its URL.") % {"name": name})
    named = safe_file_name(url)
    if named != name:
        raise DownloadError(_("The URL must name %(name)s, not %(other)s.") % {"name": name, "other": named})
    if first:
        return url, first[1]
    return url, "" if SHARD_RE.match(named) else files_on(this_node()).get(name, "")


@dataclass
class NodeFile:
    """One file a profile needs, on one node it is placed on."""

    node: Node
    name: str
    state: str  # PRESENT, MISSING, or DIFFERENT (a file of that name whose SHA256 is not this box's)
    job: DownloadJob | None  # its newest download there
    source: tuple[str, str] | None  # where the file first came from: (URL, SHA256s); None: not known

    @property
    def downloading(self) -> bool:
        return self.job is not None and self.job.status in DownloadJob.ACTIVE

    @property
    def source_shown(self) -> str:
        """The source's address for the page: its host and path, never a query or a user name (a signed
        link's signature, a token)."""
        if self.source is None:
            return ""
        parts = urlsplit(self.source[0])
        host = parts.hostname or ""
        return f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}{parts.path}"


def needed_files(profile: ServerProfile) -> list[str]:
    """The files a node must hold to serve the profile: the model, and its draft model and projector."""
    return [name for name in (profile.model_file, profile.draft_model_file, profile.mmproj_file) if name]


def profile_files(profile: ServerProfile) -> list[NodeFile]:
    """Each file the profile needs on each node it is placed on, compared with this box's copy."""
    if profile.is_remote:
        return []
    names = needed_files(profile)
    here = this_node()
    reference = files_on(here)
    rows = []
    for placement in placements_of(profile):
        held = files_on(placement.node)
        for name in names:
            state = file_state(held, name, reference.get(name, ""))
            rows.append(NodeFile(placement.node, name, state, _newest_job(placement.node, name), first_source(name)))
    return rows


def file_state(held: dict[str, str], name: str, sha256: str) -> str:
    """Whether a node's files ``held`` (``files_on``) include ``name``, and as the copy whose SHA256 is
    ``sha256`` ("" : not known, only the name is compared)."""
    theirs = held.get(name)
    if theirs is None:
        return MISSING
    return DIFFERENT if theirs and sha256 and theirs != sha256 else PRESENT


def _newest_job(node: Node, name: str) -> DownloadJob | None:
    for job in DownloadJob.objects.filter(node=node).order_by("-created_at")[:50]:
        if any(part.get("name") == name for part in job.parts):
            return job
    return None
