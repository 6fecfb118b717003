"""``manage.py restore ARCHIVE [--force]``: bring a backup back, then migrate."""

import tarfile
from pathlib import Path

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from monitor.maintenance.backup import BackupError, restore_backup


class Command(BaseCommand):
    help = "Restore a backup made by `manage.py backup` (stop the box first); refuses a database in use unless --force."

    def add_arguments(self, parser):
        parser.add_argument("archive", type=Path)
        parser.add_argument("--force", action="store_true", help="overwrite a database that already holds accounts")

    def handle(self, *args, **options):
        try:
            manifest = restore_backup(options["archive"], force=options["force"])
        except (BackupError, OSError, tarfile.TarError) as error:
            raise CommandError(str(error)) from error
        call_command("migrate", "--noinput", verbosity=0)
        self.stdout.write(f"restored the backup of {manifest.get('created_at')}")
        left_out = manifest.get("models_left_out") or []
        if left_out:
            self.stdout.write("models not in the backup (copy or download them again into the models folder):")
            for model in left_out:
                self.stdout.write(f"    {model['name']} ({model['size_bytes']} bytes)")
