"""Profiles a test serves for a while: loaded off Playwright's loop, put back to the default after."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:  # imported before Django is set up (conftest)
    from monitor.models import ServerProfile

T = TypeVar("T")


def live_id_here(profile: ServerProfile) -> str:
    """The id requests go to on this node (synchronous: it reads the profile's placement here)."""
    from monitor.nodes.registry import placement_here
    from monitor.profiles.presets import live_id

    return live_id(profile, placement_here(profile))


def off_the_loop(work: Callable[[], T]) -> T:
    """``work()`` in a thread of its own, its value returned: a browser test's Playwright keeps an event
    loop running in this one, where asyncio.run and async_to_sync refuse to run."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    def run() -> T:
        try:
            return work()
        finally:
            connection.close()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(run).result()


def served(name: str | None) -> None:
    """The named profile (the default one for None) loaded."""
    from monitor.profiles.loading import ensure_serving
    from monitor.profiles.selectors import find_profile

    off_the_loop(lambda: asyncio.run(ensure_serving(find_profile(name))))


@contextlib.contextmanager
def ignoring_eos(llama, prefix: str, hang_limit_s: int, **fields) -> Iterator[ServerProfile]:
    """A copy of the default profile whose answers never end by themselves (``--ignore-eos``): they run
    to their max_tokens, so an answer a test stops, cuts, freezes or opens again is still running when
    the test acts, whatever the model would have chosen to write. Loading it unloads the default (one
    instance at a time); the default is loaded again after. ``fields``: more of the profile's fields
    (a small ``ctx_size``: answers that end soon, where the page cannot set a length)."""
    with default_copy(llama, prefix, "--ignore-eos", hang_limit_s=hang_limit_s, **fields) as profile:
        yield profile


@contextlib.contextmanager
def default_copy(llama, prefix: str, extra_args: str, **fields) -> Iterator[ServerProfile]:
    """A copy of the default profile with ``extra_args`` (a ``--grammar`` that forces what it writes),
    served while the test runs; the default is loaded again after."""
    from monitor.profiles.selectors import find_profile
    from monitor.profiles.services import clone_profile, delete_profile, save_profile
    from monitor.profiles.validation import validate_profile
    from tests.support.stack import wait_until

    profile = clone_profile(find_profile(None))
    profile.name, profile.extra_args = f"{prefix}-{uuid.uuid4().hex[:6]}", extra_args
    for name, value in fields.items():
        setattr(profile, name, value)
    validate_profile(profile)
    save_profile(profile)
    served(profile.name)
    profile.refresh_from_db()
    try:
        yield profile
    finally:
        if not llama.running:
            llama.start()
        off_the_loop(lambda: delete_profile(profile))  # it takes the profile out of Redis's pools too
        served(None)
        wait_until(llama.healthy, 120, "the default profile loaded again")
