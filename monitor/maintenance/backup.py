"""Backups: one tar.gz with a consistent copy of the database, the uploaded documents,
the secrets and the custom chat templates, plus a manifest. Models are left out (they
are large and can be fetched again) and listed in the manifest with their sizes.

SQLite is copied with its online backup API (consistent while the box runs); PostgreSQL
with ``pg_dump`` (custom format), restored with ``pg_restore``. A restore refuses to
overwrite a database that holds any account unless forced.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sqlite3
import subprocess
import tarfile
import tempfile
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, connections
from django.db.migrations.recorder import MigrationRecorder
from django.utils import timezone
from django.utils.translation import gettext as _

FORMAT = 1
PREFIX = "qwenweb-backup-"
SECRETS = ("secret_key", "llama_api_key")
# What an archive may hold: anything else in it is refused.
TOP_LEVEL = {"manifest.json", "database", "documents", "secrets", "chat_templates"}


class BackupError(Exception):
    """A backup or restore that cannot go ahead; the message says why."""


@dataclass
class Database:
    """The database as the backup tools see it: SQLite (a file) or PostgreSQL (pg_dump's arguments)."""

    vendor: str
    path: Path | None = None
    argv: list[str] | None = None
    env: dict | None = None


def current_database() -> Database:
    config = settings.DATABASES["default"]
    if config["ENGINE"].endswith("sqlite3"):
        return Database("sqlite", path=Path(config["NAME"]))
    if config["ENGINE"].endswith("postgresql"):
        argv = ["--host", config.get("HOST") or "127.0.0.1", "--port", str(config.get("PORT") or 5432)]
        argv += ["--username", config.get("USER") or "postgres", "--dbname", config["NAME"]]
        # The password travels in the environment, never on a command line other users can read.
        return Database("postgresql", argv=argv, env={**os.environ, "PGPASSWORD": config.get("PASSWORD") or ""})
    raise BackupError(_("Backups support SQLite and PostgreSQL only."))


def _sqlite_copy(source: Path, target: Path) -> None:
    """SQLite's online backup: a consistent copy even while others write (WAL included)."""
    with closing(sqlite3.connect(source)) as src, closing(sqlite3.connect(target)) as dst:
        src.backup(dst)


def _models_left_out() -> list[dict]:
    folder = Path(settings.MODELS_DIR)
    if not folder.is_dir():
        return []
    return [
        {"name": path.name, "size_bytes": path.stat().st_size}
        for path in sorted(folder.iterdir())
        if path.is_file() and not path.name.startswith(".")
    ]


def _applied_migrations() -> dict[str, str]:
    latest: dict[str, str] = {}
    for app, name in MigrationRecorder(connection).applied_migrations():
        latest[app] = max(latest.get(app, ""), name)
    return latest


def _manifest(database: Database) -> dict:
    return {
        "format": FORMAT,
        "created_at": timezone.now().isoformat(),
        "database": database.vendor,
        "migrations": _applied_migrations(),
        "models_left_out": _models_left_out(),
    }


def _add_tree(tar: tarfile.TarFile, folder: Path, name: str) -> None:
    if folder.is_dir():
        tar.add(folder, arcname=name, recursive=True, filter=lambda info: None if info.issym() else info)


def create_backup(dest: Path) -> Path:
    """Write one archive into ``dest`` (mode 0600: it holds the secrets); returns its path."""
    dest.mkdir(parents=True, exist_ok=True)
    var_dir = Path(settings.VAR_DIR)
    database = current_database()
    archive = dest / f"{PREFIX}{timezone.now():%Y%m%d-%H%M%S}.tar.gz"
    partial = archive.with_name(archive.name + ".partial")
    with tempfile.TemporaryDirectory(dir=dest) as work:
        if database.vendor == "sqlite":
            dump = Path(work) / "db.sqlite3"
            _sqlite_copy(database.path, dump)
        else:
            dump = Path(work) / "db.pgdump"
            argv = ["pg_dump", "--format", "custom", "--no-owner", "--file", str(dump), *database.argv]
            subprocess.run(argv, check=True, env=database.env, stdout=subprocess.DEVNULL)
        manifest = json.dumps(_manifest(database), indent=2).encode()
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle, tarfile.open(fileobj=handle, mode="w:gz") as tar:
            info = tarfile.TarInfo("manifest.json")
            info.size = len(manifest)
            tar.addfile(info, io.BytesIO(manifest))
            tar.add(dump, arcname=f"database/{dump.name}")
            _add_tree(tar, Path(settings.DOCUMENT_DIR), "documents")
            for name in SECRETS:
                if (var_dir / name).is_file():
                    tar.add(var_dir / name, arcname=f"secrets/{name}")
            _add_tree(tar, var_dir / "chat_templates", "chat_templates")
    partial.replace(archive)
    return archive


def prune_backups(dest: Path, keep: int) -> list[Path]:
    """Delete all but the newest ``keep`` archives in ``dest``; returns the deleted ones."""
    archives = sorted(dest.glob(f"{PREFIX}*.tar.gz"))
    old = archives[: max(0, len(archives) - keep)]
    for path in old:
        path.unlink()
    return old


def _safe_members(tar: tarfile.TarFile) -> list[tarfile.TarInfo]:
    """Only plain files and folders under the names a backup writes; no links, no escapes."""
    members = tar.getmembers()
    for member in members:
        path = PurePosixPath(member.name)
        escapes = path.is_absolute() or ".." in path.parts or path.parts[0] not in TOP_LEVEL
        if escapes or not (member.isfile() or member.isdir()):
            raise BackupError(_("This archive is not a qwenweb backup: it holds %(name)s.") % {"name": member.name})
    return members


def database_in_use() -> bool:
    """Whether the database already holds accounts (a restore would overwrite someone's data)."""
    if "auth_user" not in connection.introspection.table_names():
        return False
    return get_user_model().objects.exists()


def _restore_database(database: Database, dump: Path) -> None:
    connections.close_all()
    if database.vendor == "sqlite":
        if dump.suffix != ".sqlite3":
            raise BackupError(_("This backup holds a PostgreSQL database; this box uses SQLite."))
        database.path.parent.mkdir(parents=True, exist_ok=True)
        _sqlite_copy(dump, database.path)
        return
    if dump.suffix != ".pgdump":
        raise BackupError(_("This backup holds an SQLite database; this box uses PostgreSQL."))
    argv = ["pg_restore", "--clean", "--if-exists", "--no-owner", *database.argv, str(dump)]
    subprocess.run(argv, check=True, env=database.env, stdout=subprocess.DEVNULL)


def _replace_tree(source: Path, target: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, target, dirs_exist_ok=True)


def restore_backup(archive: Path, *, force: bool = False) -> dict:
    """Bring back everything ``create_backup`` wrote; returns the archive's manifest."""
    database = current_database()
    var_dir = Path(settings.VAR_DIR)
    var_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=var_dir) as work, tarfile.open(archive, mode="r:gz") as tar:
        members = _safe_members(tar)  # the archive is checked before anything else
        if database_in_use() and not force:
            raise BackupError(_("The database already holds accounts; restore with --force to overwrite it."))
        tar.extractall(work, members=members, filter="data")
        unpacked = Path(work)
        try:
            manifest = json.loads((unpacked / "manifest.json").read_text())
            dump = next((unpacked / "database").iterdir())
        except (FileNotFoundError, StopIteration, ValueError) as error:
            raise BackupError(_("This archive is not a qwenweb backup: it has no manifest or database.")) from error
        _restore_database(database, dump)
        _replace_tree(unpacked / "documents", Path(settings.DOCUMENT_DIR))
        _replace_tree(unpacked / "chat_templates", var_dir / "chat_templates")
        for name in SECRETS:
            if (unpacked / "secrets" / name).is_file():
                shutil.copyfile(unpacked / "secrets" / name, var_dir / name)
                (var_dir / name).chmod(0o600)
    return manifest
