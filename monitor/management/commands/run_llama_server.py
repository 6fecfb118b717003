"""Replace this process with llama-server running the default profile.

``exec`` keeps the process manager's signals going straight to llama-server.
"""

import os

from django.core.management.base import BaseCommand, CommandError

from monitor.launch import default_profile, llama_environment, llama_server_binary


class Command(BaseCommand):
    help = "Run the local llama-server with the default profile (replaces this process)."

    def add_arguments(self, parser):
        parser.add_argument("--print", action="store_true", help="print the command line and exit")

    def handle(self, *args, **options):
        profile = default_profile()
        if not profile.model_path.exists():
            raise CommandError(f"model file missing: {profile.model_path} (run `make setup`)")
        try:
            argv = profile.argv(llama_server_binary())
        except FileNotFoundError as error:
            raise CommandError(str(error)) from error
        if options["print"]:
            self.stdout.write(" ".join(argv))
            return
        os.execve(argv[0], argv, llama_environment())
