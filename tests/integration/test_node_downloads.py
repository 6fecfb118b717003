"""Downloads to several nodes at once: the main box and a second node on this machine, joined with the
documented command (``tests/support/nodes.py``: its own worker on its own queue, its own models folder),
each fetching a file from a loopback mirror itself, verifying its SHA256, and saying so in its row.

Started from the staff Models page (Daphne), run by the real Celery workers (the main box's, and the
node's under its supervisord); a worker is frozen (SIGSTOP) where a test needs a download to stand still.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from monitor.models import DownloadJob, Node, Placement, ServerProfile
from monitor.nodes.registry import local_node
from scripts.local_services import sha256_file
from tests.support.client import base_url, login, make_user
from tests.support.file_server import FileServer
from tests.support.hold import group_paused, worker_paused
from tests.support.nodes import SecondNode
from tests.support.stack import wait_until

pytestmark = pytest.mark.usefixtures("web_server", "celery_worker")
MODELS = Path(os.environ["QWENWEB_MODELS_DIR"])
SOURCE = (MODELS / "gemma-3-270m-q4_k_m.gguf").resolve()
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
DOWNLOAD_S = 240  # a 250 MB file hashed and written twice at once on a loaded 2-core box


@pytest.fixture(scope="module")
def node_b(run_dir, celery_worker):
    node = SecondNode(run_dir, "node-dl")
    node.start()
    yield node
    node.stop()


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    root = tmp_path_factory.mktemp("node-mirror")
    for name in ("both.gguf", "wrong-both.gguf", "cancelled-on-b.gguf", "for-the-profile.gguf"):
        (root / name).symlink_to(SOURCE)
    server = FileServer(root)
    yield server
    server.close()


@pytest.fixture(scope="module")
def staff():
    return login(make_user(is_staff=True))


@pytest.fixture(scope="module")
def source_sha256():
    return sha256_file(SOURCE)


def post(http, action: str, data: dict, page: str = "/monitor/models/") -> None:
    token = CSRF.search(http.get(page).text).group(1)
    answer = http.post(action, data={**data, "csrfmiddlewaretoken": token}, headers={"Referer": base_url() + page})
    assert answer.status_code == 200, answer.text[:500]


def start_on_both(http, node_b: SecondNode, url: str, sha256: str = "") -> tuple[DownloadJob, DownloadJob]:
    """The Models page's form, both nodes ticked; (the main box's job, node b's)."""
    nodes = [local_node().pk, Node.objects.get(name=node_b.name).pk]
    post(http, "/monitor/models/download/", {"url": url, "sha256": sha256, "nodes": nodes})
    jobs = {job.node.name: job for job in DownloadJob.objects.filter(url=url).select_related("node")}
    assert set(jobs) == {local_node().name, node_b.name}
    return jobs[local_node().name], jobs[node_b.name]


def status(job: DownloadJob) -> str:
    job.refresh_from_db()
    return job.status


def wait_ended(*jobs: DownloadJob) -> None:
    wait_until(lambda: all(status(job) not in DownloadJob.ACTIVE for job in jobs), DOWNLOAD_S, "the downloads' end")


def partials(folder: Path, job: DownloadJob) -> list[Path]:
    return list((folder / ".partial").glob(f"{job.id}-*"))


def test_one_download_to_two_nodes_lands_verified_in_each_ones_folder(staff, node_b, mirror, source_sha256):
    main, b = start_on_both(staff, node_b, mirror.url("ok", "both.gguf"), source_sha256)
    wait_ended(main, b)
    assert (main.status, b.status) == ("done", "done"), (main.error, b.error)
    assert sha256_file(MODELS / "both.gguf") == source_sha256
    assert sha256_file(node_b.run.models / "both.gguf") == source_sha256
    assert main.parts[0]["sha256_actual"] == b.parts[0]["sha256_actual"] == source_sha256
    assert len([path for path, _range in mirror.requests if path.endswith("/both.gguf")]) == 2  # each fetched it
    # Each node's row says it has the file now, with its SHA256: the planner and the profile page read it.
    for name in (local_node().name, node_b.name):
        wait_until(
            lambda name=name: Node.objects.get(name=name).registered_models.get("both.gguf") == source_sha256,
            60, f"{name}'s facts",
        )  # fmt: skip
    rows = {
        job["node"]: job
        for job in staff.get("/monitor/models/downloads.json").json()["jobs"]
        if job["id"] in (main.id, b.id)
    }
    assert rows[node_b.name]["status"] == rows[local_node().name]["status"] == "done"


def test_a_wrong_sha256_fails_on_each_node_with_the_reason(staff, node_b, mirror):
    main, b = start_on_both(staff, node_b, mirror.url("ok", "wrong-both.gguf"), "0" * 64)
    wait_ended(main, b)
    for job, folder in ((main, MODELS), (b, node_b.run.models)):
        assert job.status == "failed" and "wrong-both.gguf does not match the expected SHA256" in job.error
        assert not (folder / "wrong-both.gguf").exists() and not partials(folder, job)
    assert "wrong-both.gguf" not in Node.objects.get(name=node_b.name).registered_models


def test_cancel_on_one_node_stops_it_there_only(staff, node_b, mirror, source_sha256, celery_worker):
    main, b = start_on_both(staff, node_b, mirror.url("slow", "cancelled-on-b.gguf"), source_sha256)
    moving = lambda job: job.refresh_from_db() or job.bytes_done > 0  # noqa: E731
    wait_until(lambda: moving(main), 120, "the main box's download")
    with worker_paused(celery_worker.default):  # the main box's download stands still from here
        wait_until(lambda: moving(b), 120, "node b's download")
        with group_paused(node_b.run.program_group("worker")):  # and node b's
            post(staff, f"/monitor/models/download/{b.id}/cancel/", {})
            assert (status(main), status(b)) == ("running", "cancelling")
        wait_until(lambda: status(b) == "cancelled", 60, "node b's download to stop")
        assert status(main) == "running"
    assert not (node_b.run.models / "cancelled-on-b.gguf").exists() and not partials(node_b.run.models, b)
    wait_ended(main)
    assert main.status == "done", main.error
    assert sha256_file(MODELS / "cancelled-on-b.gguf") == source_sha256


def file_row(html: str, node: str, name: str) -> str:
    found = re.search(rf'<tr data-node="{node}" data-file="{re.escape(name)}".*?</tr>', html, re.S)
    return found.group(0) if found else ""


def test_a_node_that_lacks_a_profiles_file_gets_it_from_the_profile_page(staff, node_b, mirror, source_sha256):
    shown = mirror.url("ok", "for-the-profile.gguf")
    url = shown + "?signature=not-for-the-page"  # a signed link: its query is a secret
    post(staff, "/monitor/models/download/", {"url": url, "sha256": source_sha256, "nodes": [local_node().pk]})
    first = DownloadJob.objects.get(url=url)
    wait_ended(first)
    assert first.status == "done", first.error
    profile = ServerProfile.objects.create(name="needs-a-file", model_file="for-the-profile.gguf", draft_model_file="")
    try:
        Placement.objects.create(profile=profile, node=Node.objects.get(name=node_b.name))
        page = f"/monitor/profiles/{profile.pk}/"
        row = file_row(staff.get(page).text, node_b.name, "for-the-profile.gguf")
        assert 'data-state="missing"' in row and f"Download it to {node_b.name}" in row and shown in row
        assert "not-for-the-page" not in row
        lacks = f"{node_b.name} (does not have for-the-profile.gguf)"
        assert lacks in staff.get(f"/monitor/profiles/{profile.pk}/edit/").text  # the form's "served by"
        post(staff, f"/monitor/profiles/{profile.pk}/download/",
             {"node": Node.objects.get(name=node_b.name).pk, "file": "for-the-profile.gguf"}, page)  # fmt: skip
        again = DownloadJob.objects.filter(url=url, node__name=node_b.name).get()
        assert again.parts[0]["sha256"] == source_sha256  # checked against what the first download verified
        wait_ended(again)
        assert again.status == "done", again.error
        assert sha256_file(node_b.run.models / "for-the-profile.gguf") == source_sha256
        wait_until(
            lambda: 'data-state="present"' in file_row(staff.get(page).text, node_b.name, "for-the-profile.gguf"),
            60, "the profile page to show the file on the node",
        )  # fmt: skip
        assert lacks not in staff.get(f"/monitor/profiles/{profile.pk}/edit/").text
        # A file whose first download is not known here: the page asks for its URL.
        profile.mmproj_file = "projector-from-elsewhere.gguf"
        profile.save(update_fields=["mmproj_file"])
        row = file_row(staff.get(page).text, node_b.name, "projector-from-elsewhere.gguf")
        assert 'data-state="missing"' in row and 'name="url"' in row
    finally:
        profile.delete()
