"""Model downloads from a loopback mirror serving the real default model file."""

import os
import time
from pathlib import Path

import pytest

from monitor.catalog.download_jobs import DownloadError, cancel_job, create_job
from monitor.catalog.downloads import run_job
from monitor.catalog.registry import scan_models
from monitor.models import DownloadJob
from scripts.local_services import sha256_file
from tests.support.file_server import HOLD_BYTES, FileServer

MODELS = Path(os.environ["QWENWEB_MODELS_DIR"])
SOURCE = (MODELS / "gemma-3-270m-q4_k_m.gguf").resolve()


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    root = tmp_path_factory.mktemp("mirror")
    for name in (
        "served.gguf",
        "resumed.gguf",
        "wrong.gguf",
        "cut.gguf",
        "cancel.gguf",
        "big-00001-of-00002.gguf",
        "big-00002-of-00002.gguf",
    ):
        (root / name).symlink_to(SOURCE)
    server = FileServer(root)
    yield server
    server.close()


@pytest.fixture(scope="module")
def source_sha256():
    return sha256_file(SOURCE)


def leftovers(job):
    return [p for p in (MODELS / ".partial").glob(f"{job.id}-*")]


def test_full_download_through_the_worker(celery_worker, mirror, source_sha256):
    from monitor.tasks import download_model

    job = create_job(None, mirror.url("ok", "served.gguf"), source_sha256)
    assert download_model.delay(job.id).get(timeout=180) == "done"
    job.refresh_from_db()
    assert job.bytes_done == SOURCE.stat().st_size and job.parts[0]["sha256_actual"] == source_sha256
    assert sha256_file(MODELS / "served.gguf") == source_sha256
    assert "served.gguf" in [m.path.name for m in scan_models(MODELS)[0]]


def test_killed_worker_resumes_with_range(celery_worker, mirror, source_sha256):
    from monitor.tasks import download_model, resume_stalled_downloads
    from qwenweb.celery import app
    from tests.support.stack import wait_until

    job = create_job(None, mirror.url("held", "resumed.gguf"), source_sha256)
    download_model.delay(job.id)
    assert mirror.held.wait(60), "the download did not start"  # the mirror stands at HOLD_BYTES

    def written() -> int:
        return sum(path.stat().st_size for path in leftovers(job))

    # What the worker has read is on disk in moments (the mirror sends nothing more meanwhile).
    wait_until(lambda: written() >= HOLD_BYTES // 2, 60, "the first part written")
    celery_worker.kill()
    mirror.release()
    kept = written()
    assert 0 < kept < SOURCE.stat().st_size
    celery_worker.start()

    wait_until(lambda: bool(app.control.ping(timeout=0.5)), 60, "celery worker")
    # Its heartbeat stopped with the killed worker: stalled for any length of time past it.
    assert job.id in resume_stalled_downloads.delay(0).get(timeout=30)
    deadline = time.monotonic() + 180
    while DownloadJob.objects.get(id=job.id).status != "done":
        job.refresh_from_db()
        assert job.status in DownloadJob.ACTIVE, job.error
        assert time.monotonic() < deadline
        time.sleep(0.5)
    ranges = [r for path, r in mirror.requests if "resumed.gguf" in path and r]
    assert ranges and int(ranges[-1].split("=")[1].rstrip("-")) >= kept
    assert sha256_file(MODELS / "resumed.gguf") == source_sha256


def test_wrong_hash_is_discarded(mirror):
    job = run_job(create_job(None, mirror.url("ok", "wrong.gguf"), "0" * 64).id)
    assert job.status == "failed" and "does not match the expected SHA256" in job.error
    assert not (MODELS / "wrong.gguf").exists() and not leftovers(job)


def test_truncated_body_is_never_registered(mirror):
    job = run_job(create_job(None, mirror.url("truncated", "cut.gguf")).id)
    assert job.status == "failed" and "connection broke" in job.error
    assert not (MODELS / "cut.gguf").exists()


def test_html_page_404_and_full_disk_are_refused_with_reasons(mirror):
    html = run_job(create_job(None, mirror.url("html", "served2.gguf")).id)
    assert html.status == "failed" and "sent a web page" in html.error
    missing = run_job(create_job(None, mirror.url("missing", "nothing.gguf")).id)
    assert missing.status == "failed" and "404" in missing.error
    huge = run_job(create_job(None, mirror.url("huge", "cancel.gguf")).id)
    assert huge.status == "failed" and "Not enough free disk space" in huge.error
    for job in (html, missing, huge):
        assert not leftovers(job)


def test_stalled_server_times_out(mirror):
    job = run_job(create_job(None, mirror.url("stall", "cancel.gguf")).id)
    assert job.status == "failed" and "stopped answering" in job.error


def test_cancel_stops_and_cleans_up(mirror):
    import threading

    job = create_job(None, mirror.url("slow", "cancel.gguf"))
    worker = threading.Thread(target=run_job, args=(job.id,))
    worker.start()
    while DownloadJob.objects.get(id=job.id).bytes_done < 5 * 2**20:
        time.sleep(0.1)
    cancel_job(job.id)
    worker.join(30)
    job.refresh_from_db()
    assert job.status == "cancelled" and not leftovers(job) and not (MODELS / "cancel.gguf").exists()


def test_multi_part_set_is_one_job(mirror, source_sha256):
    job = create_job(None, mirror.url("ok", "big-00001-of-00002.gguf"))
    assert [p["name"] for p in job.parts] == ["big-00001-of-00002.gguf", "big-00002-of-00002.gguf"]
    job = run_job(job.id)
    assert job.status == "done", job.error
    assert all(sha256_file(MODELS / p["name"]) == source_sha256 for p in job.parts)


@pytest.mark.parametrize(
    "url,message",
    [
        ("ftp://host/x.gguf", "http:// or https://"),
        ("http://127.0.0.1/ok/..%2F..%2Fetc%2Fevil.gguf", "plain file name"),
        ("http://127.0.0.1/ok/notes.txt", "plain file name"),
        ("http://127.0.0.1/ok/gemma-3-270m-q4_k_m.gguf", "already in the models directory"),
    ],
)
def test_bad_requests_are_refused(url, message):
    with pytest.raises(DownloadError, match=message):
        create_job(None, url)


def test_bad_hash_is_refused():
    with pytest.raises(DownloadError, match="64 hexadecimal"):
        create_job(None, "http://127.0.0.1/ok/a.gguf", "abc")
