"""The node's heartbeat: what this node serves, told to the fair queue every couple of seconds.

Runs in the llama-server supervisor (``manage.py run_llama_server``), beside the router it keeps:

- every ``HEARTBEAT_S`` it asks its router for its models (a short timeout) and publishes, for each
  profile whose live revision is loaded here, its slots and served id (``monitor.nodes.readiness``);
  the fair queue hands out slots from that alone, so a node that stops beating (killed, frozen, cut
  off) drops out of every pool within ``READY_TTL_S``;
- a router that accepts connections but does not answer ``ROUTER_FAILURES`` beats in a row is
  restarted (``ask_restart``);
- every ``WATCHDOG_INTERVAL_S`` its watchdog reads the same model list: a startup profile whose instance
  died is loaded again, and the daily restart is asked (``monitor.router.watchdog``);
- a model instance a request found frozen (``request_recovery``: nothing came for the hang limit and
  it did not answer a check) is killed and loaded again, and the timeline says so;
- on a joined node, a beat that fails (Redis or the database refusing it) asks the main box whether
  the node is still a member (at most every ``MEMBERSHIP_CHECK_S``); a node removed on the staff page
  is told so, and stops (``on_removed``) instead of failing every beat.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable

import psutil
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from monitor import timeline
from monitor.llama.client import LlamaClient
from monitor.llama.errors import LlamaError
from monitor.models import Event, ServerProfile
from monitor.nodes import membership, readiness
from monitor.profiles.loading import ensure_serving, wait_gone
from monitor.profiles.presets import live_ids_here, parse_served_id
from monitor.router.watchdog import Watchdog

log = logging.getLogger(__name__)
ROUTER_TIMEOUT_S = 1.5  # the router answers its model list in about a millisecond (see readiness.HEARTBEAT_S)
ROUTER_FAILURES = 3
GONE_WAIT_S = 20  # a killed instance's exit seen by its router (a router frozen longer is restarted by the beats)
MEMBERSHIP_CHECK_S = 10.0


class Heartbeat:
    """One thread; ``stop()`` ends it. A beat is plain blocking code in that thread (the placements query,
    the Lua call, the pause on a ``threading.Event``): only the router's request runs on an event loop, one
    kept for the thread's life, so a beat makes no hop to another thread and wakes nothing else."""

    def __init__(
        self,
        router_pid: Callable[[], int | None],
        ask_restart: Callable[[str], None],
        on_removed: Callable[[str], None] = lambda message: None,
    ):
        self.node = settings.NODE_NAME
        self.router_pid = router_pid
        self.ask_restart = ask_restart
        self.on_removed = on_removed
        self.failed_beats = 0
        self.checked_at = 0.0
        self.client = LlamaClient(timeout=ROUTER_TIMEOUT_S)
        self.slots: dict[str, int] = {}  # served id -> its slots (read once per id from /props)
        self.failures = 0
        self.watchdog = Watchdog(ask_restart)  # its daily restart is asked the same way
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()  # the pause between beats ends at once
        self._thread.join(10)

    def _run(self) -> None:
        with asyncio.Runner() as runner:
            while not self._stop.is_set():
                started = time.monotonic()
                try:
                    self.beat(runner)
                    self.failed_beats = 0
                except Exception as error:  # Redis or the database away a moment: the next beat tries again
                    close_old_connections()  # a broken database connection is dropped; a sound one is kept
                    self._failed(error)
                self._stop.wait(max(0.1, readiness.HEARTBEAT_S - (time.monotonic() - started)))

    def _failed(self, error: Exception) -> None:
        """The traceback once, a line after that; on a joined node, is it still one?"""
        if self.failed_beats == 0:
            log.warning("heartbeat failed", exc_info=True)
        else:
            log.warning("heartbeat failed again: %s", error)
        self.failed_beats += 1
        saved = membership.load(settings.VAR_DIR)
        if saved is None or time.monotonic() - self.checked_at < MEMBERSHIP_CHECK_S:
            return
        self.checked_at = time.monotonic()
        try:
            membership.check(saved)
        except membership.Refused as refused:
            if refused.status == 403:
                self._stop.set()
                self.on_removed(membership.removed_message(saved.main, str(refused)))
        except membership.Unreachable as away:
            log.warning("could not ask the main box whether this node is still one of its nodes: %s", away)

    def beat(self, runner: asyncio.Runner) -> None:
        """Ask the router, publish what this node serves; ``runner``: the thread's loop, for the router."""
        try:
            models = runner.run(self._router_models())
        except (LlamaError, TimeoutError):
            requests = readiness.publish(self.node, {}, router=False)
            self.failures += 1
            if self.failures == ROUTER_FAILURES and self.router_pid() is not None:
                self.ask_restart(
                    ngettext(
                        "llama-server did not answer %(n)d check in a row (%(s).0f s).",
                        "llama-server did not answer %(n)d checks in a row (%(s).0f s).",
                        self.failures,
                    )
                    % {"n": self.failures, "s": self.failures * readiness.HEARTBEAT_S}
                )
            self._recover_all(runner, requests)  # after the count: a deaf router's restart is not held up
            return
        self.failures = 0
        loaded = {model["id"] for model in models if model.get("status", {}).get("value") in ("loaded", "sleeping")}
        serving = {}
        for name, model in live_ids_here().items():
            if model in loaded:
                if model not in self.slots:
                    try:
                        self.slots[model] = runner.run(self._slots_of(model))
                    except (LlamaError, TimeoutError) as error:
                        # Frozen (or gone) before it said its slots: left out of this beat alone, so the
                        # node's other profiles stay served and a request's recovery of it still runs.
                        log.warning("%s did not say its slots; not published this beat: %s", model, error)
                        continue
                serving[name] = (self.slots[model], model)
        # Published less what requests found frozen meanwhile; those are restarted now.
        self._recover_all(runner, readiness.publish(self.node, serving))
        if self.watchdog.due():
            self.watchdog.look(models)

    async def _router_models(self) -> list[dict]:
        async with asyncio.timeout(ROUTER_TIMEOUT_S):
            return await self.client.list_models()

    def _recover_all(self, runner: asyncio.Runner, requests: dict[str, str]) -> None:
        for model, why in requests.items():
            runner.run(self._recover(model, why))

    async def _slots_of(self, model: str) -> int:
        props = await self.client.get_json("/props", params={"model": model})
        return int(props.get("total_slots") or 1)

    async def _recover(self, model: str, why: str) -> None:
        """Kill the frozen instance (its router sees it exit) and load the profile again; the timeline says
        so once it serves again (or why it could not). Out of its pool first: a beat that ran while the
        request found it frozen may have published it again, and no request may be sent to it meanwhile
        (one that comes finds the pool unserved and waits for the load)."""
        parsed = parse_served_id(model)
        profile = await sync_to_async(ServerProfile.objects.filter(name=parsed[0]).first)() if parsed else None
        if profile is not None:
            await readiness.withdraw(self.node, profile.name, model)
        killed = _kill_instance(self.router_pid(), model)
        problem = await self._load_again(profile, model) if profile is not None else ""
        if problem:
            message = _("%(model)s stopped responding (%(why)s); loading it again failed: %(problem)s") % {
                "model": model, "why": why, "problem": problem,
            }  # fmt: skip
        else:
            message = _("%(model)s stopped responding (%(why)s); it was restarted.") % {"model": model, "why": why}
        await sync_to_async(timeline.record)(
            Event.Kind.SERVER_RESTARTED, message, level=Event.Level.WARNING,
            profile=profile.name if profile else "", killed=killed,
        )  # fmt: skip

    async def _load_again(self, profile: ServerProfile, model: str) -> str:
        """Load ``profile`` again once the router has seen ``model``'s instance go; what went wrong, or ""."""
        if not await wait_gone(self.client, model, GONE_WAIT_S):
            return ngettext(
                "llama-server did not say within %(s)d second that the instance had stopped.",
                "llama-server did not say within %(s)d seconds that the instance had stopped.",
                GONE_WAIT_S,
            ) % {"s": GONE_WAIT_S}
        try:
            await ensure_serving(profile, self.client)
        except LlamaError as error:
            log.warning("%s did not load again after a hang: %s", model, error)
            return str(error)
        return ""


def _kill_instance(router_pid: int | None, model: str) -> bool:
    """SIGKILL the router's child that serves ``model`` (a frozen process takes no other signal)."""
    if router_pid is None:
        return False
    try:
        children = psutil.Process(router_pid).children()
    except psutil.Error:
        return False
    for child in children:
        try:
            arguments = child.cmdline()
        except psutil.Error:
            continue
        if any(a == "--alias" and b == model for a, b in zip(arguments, arguments[1:], strict=False)):
            child.kill()
            return True
    return False
