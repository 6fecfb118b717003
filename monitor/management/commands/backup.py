"""``manage.py backup [--dest DIR]``: one archive of the box's data (models left out, listed)."""

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from monitor.maintenance.backup import BackupError, create_backup, prune_backups


class Command(BaseCommand):
    help = (
        "Back up the database, documents, secrets and chat templates into one tar.gz (models are listed, not copied)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--dest", type=Path, default=None, help="folder for the archive (default: var/backups)")
        parser.add_argument("--keep", type=int, default=0, help="then delete all but the newest N archives there")

    def handle(self, *args, **options):
        dest = (options["dest"] or Path(settings.BACKUP_DIR)).resolve()
        try:
            archive = create_backup(dest)
        except BackupError as error:
            raise CommandError(str(error)) from error
        if options["keep"] > 0:
            prune_backups(dest, options["keep"])
        self.stdout.write(str(archive))
