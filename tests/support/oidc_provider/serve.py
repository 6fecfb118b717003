"""``python -m tests.support.oidc_provider.serve PORT``: the test provider's database made and filled
(``people.json`` in ``OIDC_PROVIDER_DIR``: users, groups and the one client), then served, threaded,
on 127.0.0.1:PORT until killed: over HTTPS when ``OIDC_PROVIDER_CERT`` and ``OIDC_PROVIDER_KEY`` name
a certificate and its key (each connection's handshake in its own thread), else plain HTTP."""

import json
import os
import socketserver
import ssl
import sys
from pathlib import Path

import django
from django.core.management import call_command
from django.core.servers.basehttp import WSGIRequestHandler, WSGIServer
from django.core.wsgi import get_wsgi_application


class Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


class TlsRequestHandler(WSGIRequestHandler):
    def get_environ(self):
        return {**super().get_environ(), "HTTPS": "on"}  # so the provider's own URLs say https://


def fill(folder: Path) -> None:
    from django.contrib.auth.models import Group, User
    from oauth2_provider.models import Application

    people = json.loads((folder / "people.json").read_text())
    for name, person in people["users"].items():
        user = User.objects.create_user(
            name,
            password=person["password"],
            email=f"{name}@example.org",
            first_name=name.split("-")[0].title(),
            last_name="Example",
        )
        user.is_active = person.get("active", True)
        user.save()
        for group in person["groups"]:
            user.groups.add(Group.objects.get_or_create(name=group)[0])
    client = people["client"]
    Application.objects.create(
        name="qwenweb",
        client_id=client["id"],
        client_secret=client["secret"],
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=" ".join(client["redirect_uris"]),
        algorithm=Application.RS256_ALGORITHM,
        skip_authorization=True,
    )


def main() -> None:
    django.setup()
    from django.conf import settings

    call_command("migrate", "--noinput", verbosity=0)
    fill(settings.FOLDER)
    certificate, key = os.environ.get("OIDC_PROVIDER_CERT"), os.environ.get("OIDC_PROVIDER_KEY")
    server = Server(("127.0.0.1", int(sys.argv[1])), TlsRequestHandler if certificate else WSGIRequestHandler)
    if certificate:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(certificate, key)
        server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    server.set_app(get_wsgi_application())
    server.serve_forever()


if __name__ == "__main__":
    main()
