"""Backup and restore for real: a person's conversation, document (rows and stored file),
API key and a custom profile with its chat template go into one archive; restored by
``manage.py restore`` into a fresh var folder (as a fresh clone would be) every row and
file is back, and the API key still authenticates."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from chat.api.keys import create_key
from chat.documents.uploads import stored_file
from chat.models import Conversation, Document, DocumentPage, Message
from monitor.maintenance.backup import create_backup, prune_backups
from monitor.models import ServerProfile
from monitor.profiles.options import template_file, write_template
from tests.support.client import make_user
from tests.support.stack import ROOT

# Each database's own backup path is tested where the suite runs on it (make test / make test-postgres);
# the other one is deselected in tests/conftest.py, not skipped.
sqlite_only = pytest.mark.database("sqlite")


def manage(var_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "QWENWEB_VAR_DIR": str(var_dir)}
    env.pop("QWENWEB_DOCUMENT_DIR", None)
    argv = [sys.executable, str(ROOT / "manage.py"), *args]
    return subprocess.run(argv, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.fixture
def data():
    user = make_user()
    conversation = Conversation.objects.create(owner=user, title="Backed up")
    for role, text in (("user", "question one"), ("assistant", "answer one"), ("user", "question two")):
        Message.objects.create(conversation=conversation, role=role, content=text)
    document = Document.objects.create(owner=user, conversation=conversation, name="notes.txt", kind="txt")
    DocumentPage.objects.bulk_create(DocumentPage(document=document, number=n, text=f"page {n}") for n in (1, 2))
    stored_file(document).write_bytes(b"the stored upload\n")
    _, key = create_key(user, "backup test")
    profile = ServerProfile.objects.create(
        name=f"custom-{user.username}", model_file="gemma-3-270m-q4_k_m.gguf", chat_template_jinja="{{ messages }}"
    )
    write_template(profile)
    return {"user": user, "conversation": conversation, "document": document, "key": key, "profile": profile}


@sqlite_only
def test_backup_restores_onto_a_fresh_clone(data, tmp_path):
    archive = create_backup(tmp_path / "backups")
    assert oct(archive.stat().st_mode & 0o777) == "0o600"
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
        manifest = json.loads(tar.extractfile("manifest.json").read())
    assert "database/db.sqlite3" in names and "secrets/secret_key" in names and "secrets/llama_api_key" in names
    assert f"documents/{stored_file(data['document']).name}" in names
    assert f"chat_templates/{template_file(data['profile']).name}" in names
    left_out = {m["name"]: m["size_bytes"] for m in manifest["models_left_out"]}
    assert left_out["gemma-3-270m-q4_k_m.gguf"] > 10**8
    assert not any(name.endswith(".gguf") for name in names)  # models are listed, never copied

    fresh = tmp_path / "fresh-var"
    restored = manage(fresh, "restore", str(archive))
    assert restored.returncode == 0, restored.stdout
    assert "gemma-3-270m-q4_k_m.gguf" in restored.stdout  # named as left out

    with sqlite3.connect(fresh / "db.sqlite3") as db:
        one = lambda sql, *args: db.execute(sql, args).fetchone()  # noqa: E731
        assert one("SELECT username FROM auth_user WHERE id = ?", data["user"].id) == (data["user"].username,)
        conversation_id = data["conversation"].id.hex
        assert one("SELECT title FROM chat_conversation WHERE id = ?", conversation_id) == ("Backed up",)
        texts = db.execute("SELECT content FROM chat_message WHERE conversation_id = ? ORDER BY id", (conversation_id,))
        assert [row[0] for row in texts] == ["question one", "answer one", "question two"]
        document_id = data["document"].id.hex
        assert one("SELECT count(*) FROM chat_documentpage WHERE document_id = ?", document_id) == (2,)
        assert one("SELECT chat_template_jinja FROM monitor_serverprofile WHERE name = ?", data["profile"].name) == (
            "{{ messages }}",
        )
    assert (fresh / "documents" / stored_file(data["document"]).name).read_bytes() == b"the stored upload\n"
    assert (fresh / "chat_templates" / template_file(data["profile"]).name).read_text() == "{{ messages }}"
    assert (fresh / "secret_key").read_text() == (Path(os.environ["QWENWEB_VAR_DIR"]) / "secret_key").read_text()

    check = "from chat.api.keys import bearer_key, caller_of; print(caller_of(bearer_key(" + repr(
        f"Bearer {data['key']}"
    ) + ")).owner_id)"  # fmt: skip
    authenticated = manage(fresh, "shell", "-c", check)
    assert authenticated.returncode == 0, authenticated.stdout
    assert authenticated.stdout.strip().splitlines()[-1] == str(data["user"].id)

    refused = manage(fresh, "restore", str(archive))
    assert refused.returncode == 1
    assert "already holds accounts; restore with --force" in refused.stdout
    assert manage(fresh, "restore", "--force", str(archive)).returncode == 0


def test_retention_keeps_the_newest(tmp_path):
    for stamp in ("20260101-000000", "20260102-000000", "20260103-000000"):
        (tmp_path / f"qwenweb-backup-{stamp}.tar.gz").write_bytes(b"")
    deleted = prune_backups(tmp_path, keep=2)
    assert [p.name for p in deleted] == ["qwenweb-backup-20260101-000000.tar.gz"]
    assert len(list(tmp_path.iterdir())) == 2


def test_an_archive_with_foreign_paths_is_refused(tmp_path):
    evil = tmp_path / "evil.tar.gz"
    with tarfile.open(evil, "w:gz") as tar:
        (tmp_path / "x").write_text("x")
        tar.add(tmp_path / "x", arcname="../outside")
    result = manage(tmp_path / "var", "restore", str(evil))
    assert result.returncode == 1 and "not a qwenweb backup" in result.stdout
    assert not (tmp_path / "outside").exists()


@pytest.mark.database("postgresql")
def test_postgres_backup_is_a_pg_dump_archive(data, tmp_path):
    archive = create_backup(tmp_path)
    with tarfile.open(archive) as tar:
        tar.extract("database/db.pgdump", tmp_path, filter="data")
    listing = subprocess.run(
        ["pg_restore", "--list", str(tmp_path / "database" / "db.pgdump")],
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    ).stdout
    assert "TABLE public chat_message" in listing and "TABLE public chat_apikey" in listing
