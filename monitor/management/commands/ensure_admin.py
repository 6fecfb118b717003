import os

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the first admin account (password from QWENWEB_ADMIN_PASSWORD) if no superuser exists."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin")

    def handle(self, *args, **options):
        users = get_user_model()
        if users.objects.filter(is_superuser=True).exists():
            self.stdout.write("exists")
            return
        users.objects.create_superuser(options["username"], "", os.environ["QWENWEB_ADMIN_PASSWORD"])
        self.stdout.write("created")
