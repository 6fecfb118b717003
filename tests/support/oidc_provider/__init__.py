"""A real OpenID Connect provider for the OIDC tests and the login bench: django-oauth-toolkit
(``oauth2_provider``, its OIDC: RS256 keys, discovery, userinfo, PKCE required) run as a small Django
project of its own (settings.py, serve.py) in its own process, with SQLite and a fresh RSA key in a
temporary folder, on a free loopback port.

Its people (``PEOPLE``, each named ``ROLE-TAG`` with a tag of this provider's, so that accounts
an earlier provider or the LDAP tests made never share a name: ``name(role)``): alice (in ``qwenweb-users``, ``analysts`` and ``admins``), bob
(``qwenweb-users``, ``analysts``), carol (``qwenweb-users``, disabled: the provider refuses her),
erin (in no group). One confidential client, ``CLIENT_ID``, may come back to any loopback port's
``/oidc/callback/``. Over HTTPS when made with ``certificates`` (tests/support/tls.py: a CA of the
test's own, which no system trusts), else plain HTTP. ``set_active`` disables or enables a person there, ``delete`` deletes one; ``stop``/``go`` SIGSTOP and
SIGCONT the provider (it accepts connections and answers nothing); ``kill`` ends it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urljoin

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.support.server_process import ServerProcess
from tests.support.tls import Certificates

ROOT = Path(__file__).resolve().parents[3]
CLIENT_ID, CLIENT_SECRET = "qwenweb-test", "client-secret-2026"
PASSWORDS = {"alice": "alice-Pass-1", "bob": "bob-Pass-2", "carol": "carol-Pass-3", "erin": "erin-Pass-4"}
PEOPLE = {
    "alice": {"groups": ["qwenweb-users", "analysts", "admins"]},
    "bob": {"groups": ["qwenweb-users", "analysts"]},
    "carol": {"groups": ["qwenweb-users"], "active": False},
    "erin": {"groups": []},
}


class Provider(ServerProcess):
    """One provider, started by ``start`` and ended by ``close``."""

    def __init__(self, folder: Path | None = None, certificates: Certificates | None = None) -> None:
        super().__init__(folder or Path(tempfile.mkdtemp(prefix="qwenweb-oidc-")))
        self.certificates = certificates
        self.issuer = f"{'https' if certificates else 'http'}://127.0.0.1:{self.port}/o"
        self.verify = str(certificates.ca) if certificates else True  # what the test's own HTTP client trusts
        self.tag = uuid.uuid4().hex[:6]

    def name(self, role: str) -> str:
        return f"{role}-{self.tag}"

    def environment(self, **changes: str) -> dict[str, str]:
        """The QWENWEB_OIDC_* an office would set for this provider (``changes``: others, '' drops one)."""
        environ = {
            "QWENWEB_OIDC_ISSUER": self.issuer,
            "QWENWEB_OIDC_CLIENT_ID": CLIENT_ID,
            "QWENWEB_OIDC_CLIENT_SECRET": CLIENT_SECRET,
            "QWENWEB_OIDC_PROVIDER_NAME": "Office SSO",
            "QWENWEB_OIDC_REQUIRE_GROUP": "qwenweb-users",
            "QWENWEB_OIDC_STAFF_GROUP": "admins",
            "QWENWEB_OIDC_GROUP_MAP": json.dumps({"analysts": "Analysts"}),
            "QWENWEB_OIDC_TIMEOUT_S": "2",
            "QWENWEB_OIDC_SCOPES": "openid email profile offline_access",
        }
        environ.update(changes)
        return {name: value for name, value in environ.items() if value}

    def start(self) -> Provider:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        (self.folder / "signing-key.pem").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        users = {self.name(role): {**person, "password": PASSWORDS[role]} for role, person in PEOPLE.items()}
        client = {"id": CLIENT_ID, "secret": CLIENT_SECRET, "redirect_uris": ["http://127.0.0.1/oidc/callback/"]}
        (self.folder / "people.json").write_text(json.dumps({"users": users, "client": client}))
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.support.oidc_provider.settings",
            "OIDC_PROVIDER_DIR": str(self.folder),
            "OIDC_PROVIDER_ISSUER": self.issuer,
        }
        if self.certificates:
            env["OIDC_PROVIDER_CERT"] = str(self.certificates.certificate)
            env["OIDC_PROVIDER_KEY"] = str(self.certificates.key)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.oidc_provider.serve", str(self.port)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(self.folder / "provider.log", "wb"),  # noqa: SIM115 (the child keeps it)
        )
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("the provider exited: " + (self.folder / "provider.log").read_text()[-2000:])
            try:
                if (
                    httpx.get(
                        self.issuer + "/.well-known/openid-configuration", timeout=2, verify=self.verify
                    ).status_code
                    == 200
                ):
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError("the provider did not answer within 60 s")

    def set_active(self, username: str, active: bool) -> None:
        """The person disabled or enabled at the provider (its own database)."""
        with sqlite3.connect(self.folder / "provider.sqlite3") as database:
            database.execute("UPDATE auth_user SET is_active = ? WHERE username = ?", (active, username))

    def delete(self, username: str) -> None:
        """The person deleted at the provider, with their tokens and grants, as its admin pages would."""
        with sqlite3.connect(self.folder / "provider.sqlite3") as database:
            (user_id,) = database.execute("SELECT id FROM auth_user WHERE username = ?", (username,)).fetchone()
            for table in ("accesstoken", "refreshtoken", "idtoken", "grant"):
                database.execute(f"DELETE FROM oauth2_provider_{table} WHERE user_id = ?", (user_id,))  # noqa: S608
            database.execute("DELETE FROM auth_user_groups WHERE user_id = ?", (user_id,))
            database.execute("DELETE FROM auth_user WHERE id = ?", (user_id,))

    def log_in(self, authorize_url: str, username: str, password: str) -> httpx.Response:
        """A person at the provider's login page, from the app's redirect to the provider: the
        provider's last answer (a redirect to the app's callback, or its login page again)."""
        with httpx.Client(timeout=30, verify=self.verify) as browser:
            answer = browser.get(authorize_url)
            while answer.status_code == 302 and answer.headers["location"].startswith(("/", self.issuer)):
                answer = browser.get(urljoin(str(answer.url), answer.headers["location"]))
            if "csrfmiddlewaretoken" not in answer.text:
                return answer
            token = answer.text.split('name="csrfmiddlewaretoken" value="')[1].split('"')[0]
            answer = browser.post(
                str(answer.url),
                data={"csrfmiddlewaretoken": token, "username": username, "password": password},
                headers={"Referer": str(answer.url)},
            )
            while answer.status_code == 302 and answer.headers["location"].startswith(("/", self.issuer)):
                answer = browser.get(urljoin(str(answer.url), answer.headers["location"]))
            return answer
