"""Replace this process with llama-server running the default server profile.

``exec`` keeps the process manager's signals going straight to llama-server.
Without any stored profile it runs the built-in default launch settings.
"""

import os
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from monitor.launch import default_profile as builtin_profile
from monitor.launch import llama_environment, llama_server_binary
from monitor.profiles import default_profile, model_path, profile_argv, write_template


class Command(BaseCommand):
    help = "Run the local llama-server with the default profile (replaces this process)."

    def add_arguments(self, parser):
        parser.add_argument("--print", action="store_true", help="print the command line and exit")

    def handle(self, *args, **options):
        try:
            binary = llama_server_binary()
        except FileNotFoundError as error:
            raise CommandError(str(error)) from error
        profile = default_profile()
        if profile is not None:
            if not model_path(profile.model_file).exists():
                raise CommandError(f"profile {profile.name}: model file missing: {profile.model_file}")
            url = urlsplit(settings.LLAMA_SERVER_URL)
            write_template(profile)
            argv = profile_argv(profile, binary, host=url.hostname or "127.0.0.1", port=url.port or 8081)
        else:
            launch = builtin_profile()
            if not launch.model_path.exists():
                raise CommandError(f"model file missing: {launch.model_path} (run `make setup`)")
            argv = launch.argv(binary)
        if options["print"]:
            self.stdout.write(" ".join(argv))
            return
        os.execve(argv[0], argv, llama_environment())
