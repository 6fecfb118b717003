"""Test session set-up: a private folder and ports, Django configured against them.

Services start only when a test asks for them (session fixtures), so the unit
tests run without any.
"""

from __future__ import annotations

import runpy
import shutil

import pytest

from tests.support import stack
from tests.support.profiles import served

# The catalogues as the .po files say now (the .mo files are built, not kept in git).
runpy.run_path(str(stack.ROOT / "scripts" / "compile_messages.py"))

RUN_DIR = stack.new_run_dir("qwenweb-test-")
stack.configure_environment(RUN_DIR)

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

call_command("migrate", "--noinput", verbosity=0)


def pytest_collection_modifyitems(config, items):
    """Tests marked ``database("postgresql")`` run only on that database, likewise for SQLite."""
    from django.conf import settings

    vendor = "postgresql" if "postgresql" in settings.DATABASES["default"]["ENGINE"] else "sqlite"
    other = [item for item in items if (mark := item.get_closest_marker("database")) and mark.args[0] != vendor]
    if other:
        config.hook.pytest_deselected(items=other)
        items[:] = [item for item in items if item not in other]


@pytest.fixture(autouse=True)
def fresh_state():
    """Each test starts from what it makes itself, not from what an earlier test left behind.

    This process's caches of facts about llama-server (what a model id serves, the router's
    states, each chat template's measure) are emptied: an earlier test may have restarted or
    reloaded the server they describe; the fair queues' objects are made anew. The timeline is emptied too, so a check on its events
    reads only the events this test caused.
    """
    from chat.conversations import context
    from monitor.llama.serving import forget_serving_info
    from monitor.models import Event, ServerProfile
    from monitor.profiles.status import forget_status
    from tests.support.serving_state import forget_queues

    forget_serving_info()
    forget_status()
    forget_queues()
    # Remote profiles made for a fake upstream (tests/support/turns.py) point at servers gone with their test.
    ServerProfile.objects.filter(name__startswith="upstream-").delete()
    context._template_bytes.clear()  # each chat template measured again at its next use
    Event.objects.all().delete()
    yield


@pytest.fixture(scope="session")
def run_dir():
    yield RUN_DIR


@pytest.fixture(scope="session")
def redis_server():
    service = stack.start_redis(RUN_DIR)
    yield service
    service.stop()


@pytest.fixture(scope="session")
def llama_server():
    server = stack.start_llama(RUN_DIR, slots_debug=True)
    yield server
    server.stop()


@pytest.fixture
def llama(llama_server):
    """The llama-server, restarted first if an earlier test killed it, serving the default profile (an
    earlier test may have loaded another in its place: one instance at a time)."""
    if not llama_server.running:
        llama_server.start()
    served(None)
    yield llama_server
    if not llama_server.running:
        llama_server.start()


@pytest.fixture
def endless(llama):
    """The default profile's copy whose answers run to their max_tokens (``ignoring_eos``), never taken
    for hung (the tests freeze it on purpose)."""
    from tests.support.profiles import ignoring_eos

    with ignoring_eos(llama, "endless", hang_limit_s=3600) as profile:
        yield profile


@pytest.fixture(scope="session")
def web_server(redis_server, llama_server):
    service = stack.start_web(RUN_DIR)
    yield service
    service.stop()


@pytest.fixture(scope="session")
def celery_worker(redis_server):
    service = stack.start_worker(RUN_DIR)
    yield service
    service.stop()


@pytest.fixture(scope="session")
def sampler(redis_server, llama_server):
    service = stack.start_sampler(RUN_DIR)
    yield service
    service.stop()


def pytest_sessionfinish(session, exitstatus):
    if exitstatus == 0:
        shutil.rmtree(RUN_DIR, ignore_errors=True)
    else:
        print(f"\nservice logs kept in {RUN_DIR}")
