"""``python -m tests.support.oidc_provider.serve PORT``: the test provider's database made and filled
(``people.json`` in ``OIDC_PROVIDER_DIR``: users, groups and the one client), then served, threaded,
on 127.0.0.1:PORT until killed."""

import json
import sys
from pathlib import Path

import django
from django.core.management import call_command
from django.core.servers.basehttp import WSGIServer, run
from django.core.wsgi import get_wsgi_application


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
    run("127.0.0.1", int(sys.argv[1]), get_wsgi_application(), threading=True, server_cls=WSGIServer)


if __name__ == "__main__":
    main()
