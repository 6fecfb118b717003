"""Test session set-up: a private folder and ports, Django configured against them.

Services start only when a test asks for them (session fixtures), so the unit
tests run without any.
"""

from __future__ import annotations

import runpy
import shutil

import pytest

from tests.support import stack

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
    from chat.conversations.context import forget_template_overheads
    from monitor.llama.serving import forget_serving_info
    from monitor.models import Event, ServerProfile
    from monitor.profiles.status import forget_status
    from monitor.serving.slot import forget_queues

    forget_serving_info()
    forget_status()
    forget_queues()
    # Remote profiles made for a fake upstream (tests/support/turns.py) point at servers gone with their test.
    ServerProfile.objects.filter(name__startswith="upstream-").delete()
    forget_template_overheads()
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
    _served(None)
    yield llama_server
    if not llama_server.running:
        llama_server.start()


def _served(name: str | None) -> None:
    """The named profile (the default one for None) loaded."""
    import asyncio

    from monitor.profiles.loading import ensure_serving
    from monitor.profiles.selectors import find_profile

    _off_the_loop(lambda: asyncio.run(ensure_serving(find_profile(name))))


def _off_the_loop(work) -> None:
    """``work()`` in a thread of its own: a browser test's Playwright keeps an event loop running in
    this one, where asyncio.run and async_to_sync refuse to run."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    def run() -> None:
        try:
            work()
        finally:
            connection.close()

    with ThreadPoolExecutor(1) as pool:
        pool.submit(run).result()


@pytest.fixture
def endless(llama):
    """The default profile's copy whose answers never end by themselves (``--ignore-eos``): they run
    to their max_tokens, so an answer a test stops, cuts or opens again is still running when the
    test acts, whatever the model would have chosen to write. Loading it unloads the default (one
    instance at a time); the default is loaded again after."""
    import uuid

    from monitor.profiles.selectors import find_profile
    from monitor.profiles.services import clone_profile, delete_profile, save_profile
    from monitor.profiles.validation import validate_profile

    profile = clone_profile(find_profile(None))
    profile.name, profile.extra_args = f"endless-{uuid.uuid4().hex[:6]}", "--ignore-eos"
    profile.hang_limit_s = 3600  # the tests freeze it on purpose: never taken for hung here
    validate_profile(profile)
    save_profile(profile)
    _served(profile.name)
    profile.refresh_from_db()
    try:
        yield profile
    finally:
        if not llama.running:
            llama.start()
        _off_the_loop(lambda: delete_profile(profile))  # it takes the profile out of Redis's pools too
        _served(None)
        stack.wait_until(llama.healthy, 120, "the default profile loaded again")


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
