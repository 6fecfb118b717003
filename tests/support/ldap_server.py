"""A real directory for the LDAP tests: Debian's OpenLDAP ``slapd`` in its own process, on a free
loopback port, with its own configuration and database made here (``slapadd``), and TLS with a
certificate made by the test (tests/support/tls.py; the CA is what the app is given): StartTLS on
``url`` (``ldap://``), and LDAPS on ``ldaps_url`` (``ldaps://``, a second port, the same certificate).

The directory ``dc=example,dc=org`` holds a service account (``cn=reader``: it may read, not write),
people and groups:

- alice: in ``qwenweb-users``, ``analysts`` and ``admins`` (mapped to staff);
- bob: in ``qwenweb-users`` and ``analysts``;
- carol: in ``qwenweb-users`` but disabled (``description: disabled``, which the user filter refuses);
- erin: in no group (``qwenweb-users`` is required).

``cn=admin`` (the root DN) changes entries through ``ldapmodify`` (``change``). ``stop``/``go``
SIGSTOP and SIGCONT the server (it accepts connections and answers nothing); ``kill`` ends it.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from tests.support.server_process import ServerProcess, free_port
from tests.support.tls import make_certificates

SUFFIX = "dc=example,dc=org"
ROOT_DN, ROOT_PASSWORD = f"cn=admin,{SUFFIX}", "root-secret-2026"
READER_DN, READER_PASSWORD = f"cn=reader,{SUFFIX}", "reader-secret-2026"
PEOPLE, GROUPS = f"ou=people,{SUFFIX}", f"ou=groups,{SUFFIX}"
PASSWORDS = {"alice": "alice-Pass-1", "bob": "bob-Pass-2", "carol": "carol-Pass-3", "erin": "erin-Pass-4"}
MEMBERS = {"qwenweb-users": ["alice", "bob", "carol"], "analysts": ["alice", "bob"], "admins": ["alice"]}
# The user filter the tests give the app: a person marked disabled is not found.
USER_FILTER = "(&(uid=%(user)s)(!(description=disabled)))"

SCHEMAS = ("core", "cosine", "inetorgperson", "nis")
CONFIG = """\
{includes}
modulepath /usr/lib/ldap
moduleload back_mdb
pidfile {folder}/slapd.pid
argsfile {folder}/slapd.args
TLSCACertificateFile {certs.ca}
TLSCertificateFile {certs.certificate}
TLSCertificateKeyFile {certs.key}
database mdb
maxsize 16777216
suffix "{suffix}"
rootdn "{root_dn}"
rootpw {root_password}
directory {folder}/data
access to attrs=userPassword by anonymous auth by self auth by * none
access to * by dn.exact="{reader_dn}" read by self read by * none
"""


def person_dn(uid: str) -> str:
    return f"uid={uid},{PEOPLE}"


def group_dn(name: str) -> str:
    return f"cn={name},{GROUPS}"


def _entries() -> str:
    blocks = [
        f"dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example office",
        f"dn: {READER_DN}\nobjectClass: person\nobjectClass: simpleSecurityObject\ncn: reader\nsn: reader\n"
        f"userPassword: {READER_PASSWORD}",
        f"dn: {PEOPLE}\nobjectClass: organizationalUnit\nou: people",
        f"dn: {GROUPS}\nobjectClass: organizationalUnit\nou: groups",
    ]
    for uid, password in PASSWORDS.items():
        lines = [
            f"dn: {person_dn(uid)}",
            "objectClass: inetOrgPerson",
            f"uid: {uid}",
            f"cn: {uid.title()} Example",
            f"givenName: {uid.title()}",
            "sn: Example",
            f"mail: {uid}@example.org",
            f"userPassword: {password}",
        ]
        if uid == "carol":
            lines.append("description: disabled")
        blocks.append("\n".join(lines))
    for name, members in MEMBERS.items():
        blocks.append(
            "\n".join([f"dn: {group_dn(name)}", "objectClass: groupOfNames", f"cn: {name}"])
            + "".join(f"\nmember: {person_dn(uid)}" for uid in members)
        )
    return "\n\n".join(blocks) + "\n"


class Directory(ServerProcess):
    """One slapd, started by ``start`` and ended by ``close``."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        self.certificates = make_certificates(folder)
        self.url = f"ldap://127.0.0.1:{self.port}"
        ldaps_port = free_port()
        while ldaps_port == self.port:  # the first port is free again until slapd takes it
            ldaps_port = free_port()
        self.ldaps_url = f"ldaps://127.0.0.1:{ldaps_port}"
        self.config = folder / "slapd.conf"

    def environment(self, **changes: str) -> dict[str, str]:
        """The QWENWEB_LDAP_* an office would set for this directory (``changes``: others, '' drops one)."""
        environ = {
            "QWENWEB_LDAP_URL": self.url,
            "QWENWEB_LDAP_BIND_DN": READER_DN,
            "QWENWEB_LDAP_BIND_PASSWORD": READER_PASSWORD,
            "QWENWEB_LDAP_USER_BASE": PEOPLE,
            "QWENWEB_LDAP_USER_FILTER": USER_FILTER,
            "QWENWEB_LDAP_START_TLS": "1",
            "QWENWEB_LDAP_CA_FILE": str(self.certificates.ca),
            "QWENWEB_LDAP_GROUP_BASE": GROUPS,
            "QWENWEB_LDAP_REQUIRE_GROUP": group_dn("qwenweb-users"),
            "QWENWEB_LDAP_STAFF_GROUP": group_dn("admins"),
            "QWENWEB_LDAP_GROUP_MAP": json.dumps({group_dn("analysts"): "Analysts"}),
            "QWENWEB_LDAP_TIMEOUT_S": "2",
        }
        environ.update(changes)
        return {name: value for name, value in environ.items() if value}

    def start(self) -> Directory:
        (self.folder / "data").mkdir(exist_ok=True)
        includes = "\n".join(f"include /etc/ldap/schema/{name}.schema" for name in SCHEMAS)
        self.config.write_text(
            CONFIG.format(
                includes=includes,
                folder=self.folder,
                certs=self.certificates,
                suffix=SUFFIX,
                root_dn=ROOT_DN,
                root_password=ROOT_PASSWORD,
                reader_dn=READER_DN,
            )
        )
        data = self.folder / "entries.ldif"
        data.write_text(_entries())
        subprocess.run(["slapadd", "-f", str(self.config), "-l", str(data)], check=True, capture_output=True)
        self.process = subprocess.Popen(
            ["slapd", "-f", str(self.config), "-h", f"{self.url}/ {self.ldaps_url}/", "-d", "0"],
            stdout=subprocess.DEVNULL,
            stderr=open(self.folder / "slapd.log", "wb"),  # noqa: SIM115 (the child keeps it)
        )
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        """Until an anonymous read of the root DSE answers (slapd opens its port after loading)."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("slapd exited: " + (self.folder / "slapd.log").read_text()[-2000:])
            done = subprocess.run(
                ["ldapsearch", "-x", "-H", self.url, "-s", "base", "-b", "", "(objectClass=*)", "-o", "nettimeout=2"],
                capture_output=True,
            )
            if done.returncode == 0:
                return
            time.sleep(0.1)
        raise RuntimeError("slapd did not answer within 30 s")

    def change(self, ldif: str) -> None:
        """An LDIF change (``changetype: ...``) made as the root DN."""
        subprocess.run(
            ["ldapmodify", "-x", "-H", self.url, "-D", ROOT_DN, "-w", ROOT_PASSWORD],
            input=ldif.encode(),
            check=True,
            capture_output=True,
        )
