"""A login round trip, median of 20 each, in one run: a local account, a directory (LDAP) account
against a real OpenLDAP ``slapd`` over StartTLS, and an OIDC account through a real provider
(django-oauth-toolkit), both started the way the tests start them (tests/support/ldap_server.py,
tests/support/oidc_provider/). The three take turns, against one Daphne with LDAP and OIDC on.

A round trip is what a person's browser does, from a fresh session: local and LDAP, the login page
and its POST (up to the redirect into the chat); OIDC, the button's redirect, the provider's login
page and its POST, its authorization redirect, and our callback (up to the redirect into the chat),
the provider's own time included. Prints ``local_login_ms=``, ``ldap_login_ms=``, ``oidc_login_ms=``.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support import stack  # noqa: E402
from tests.support.ldap_server import PASSWORDS as LDAP_PASSWORDS  # noqa: E402
from tests.support.ldap_server import Directory  # noqa: E402
from tests.support.oidc_provider import PASSWORDS as OIDC_PASSWORDS  # noqa: E402
from tests.support.oidc_provider import Provider  # noqa: E402

RUNS = 20


def password_login(base: str, username: str, password: str) -> float:
    started = time.perf_counter()
    with httpx.Client(base_url=base, timeout=60) as client:
        page = client.get("/login/")
        answer = client.post(
            "/login/",
            data={"username": username, "password": password, "csrfmiddlewaretoken": page.cookies["csrftoken"]},
            headers={"Referer": base + "/login/"},
        )
    elapsed = (time.perf_counter() - started) * 1000
    if answer.status_code != 302:
        raise RuntimeError(f"the login of {username} did not succeed (HTTP {answer.status_code})")
    return elapsed


def oidc_login(base: str, provider: Provider) -> float:
    started = time.perf_counter()
    with httpx.Client(base_url=base, timeout=60) as client:
        start = client.get("/oidc/login/")
        answer = provider.log_in(start.headers["location"], provider.name("bob"), OIDC_PASSWORDS["bob"])
        callback = urlsplit(answer.headers["location"])
        done = client.get(f"{callback.path}?{callback.query}")
    elapsed = (time.perf_counter() - started) * 1000
    if done.status_code != 302 or done.headers["location"] != "/":
        raise RuntimeError(f"the OIDC login did not succeed (HTTP {done.status_code})")
    return elapsed


def main() -> None:
    run_dir = stack.django_run_dir("qwenweb-bench-")
    directory = Directory(Path(tempfile.mkdtemp(prefix="qwenweb-ldap-"))).start()
    provider = Provider().start()
    services = []
    try:
        os.environ.update(directory.environment())
        os.environ.update(provider.environment())
        services += [stack.start_redis(run_dir), stack.start_web(run_dir)]
        from tests.support.client import base_url, make_user

        base = base_url()
        local = make_user()
        rounds = {
            "local": lambda: password_login(base, local.username, local.raw_password),
            "ldap": lambda: password_login(base, "bob", LDAP_PASSWORDS["bob"]),
            "oidc": lambda: oidc_login(base, provider),
        }
        for measure in rounds.values():  # warm-up: the accounts made, the connections' first costs paid
            measure()
        figures: dict[str, list[float]] = {name: [] for name in rounds}
        for _run in range(RUNS):
            for name, measure in rounds.items():
                figures[name].append(measure())
        for name, values in figures.items():
            print(f"{name}: min {min(values):.1f} ms, max {max(values):.1f} ms over {RUNS}")
        for name, values in figures.items():
            print(f"{name}_login_ms={statistics.median(values):.1f}")
    finally:
        for service in reversed(services):
            service.stop()
        provider.close()
        directory.close()


if __name__ == "__main__":
    main()
