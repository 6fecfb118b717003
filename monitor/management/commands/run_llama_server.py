"""Run the local llama-server in router mode, one model id per server profile, and keep it running."""

from django.core.management.base import BaseCommand, CommandError

from monitor.llama.binary import llama_server_binary
from monitor.profiles.presets import write_preset
from monitor.router.supervisor import RouterSupervisor, router_argv


class Command(BaseCommand):
    help = "Run llama-server (router mode, presets from the server profiles) and restart it when it dies."

    def add_arguments(self, parser):
        parser.add_argument("--print", action="store_true", help="write the presets, print the command line, exit")

    def handle(self, *args, **options):
        try:
            binary = llama_server_binary()
        except FileNotFoundError as error:
            raise CommandError(str(error)) from error
        if options["print"]:
            self.stdout.write(f"# presets: {write_preset()}")
            self.stdout.write(" ".join(router_argv(binary)))
            return
        RouterSupervisor(binary, out=self.stdout).run()
