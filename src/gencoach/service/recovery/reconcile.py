"""Reconciliation: requests whose worker died are retried or abandoned, never lost.

Workers renew their request's lease while they work. Every `every_s` (at most a third
of a lease) the controller looks at its runs' requests: one in flight keeps its slot
while its holder lives and is dispatched again when it does not (see
`gencoach.service.dispatching.holding`); one answered and awaiting reinjection keeps its pending
slot, so the controller renews its lease; one left as a bare opportunity by a crash is
routed again. Queues whose jobs wait unclaimed too long are reported once each. RQ's
own recovery of a killed job is far slower and is not waited for.

Finished runs are visited until every request they have is terminal (`RunEnds`);
active runs that fell silent are finished as abandoned (one read of every active run's
state a pass, in batches, and the abandoning script only for those found silent); the
open runs' entries in the runs index are checked against their own state every
`REPAIR_EVERY_S` (and runs whose keys expired leave it);
and runs whose state vanished while still active or unsaved (Redis restarted without
persistence) are named in the log. Saved runs are looked at for `RECHECK_FOR_S` after
their save, so a pass costs the open and recent runs, not all the runs Redis keeps.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import anyio
import redis.exceptions
from anyio.abc import TaskStatus

from gencoach.config import Settings
from gencoach.limits import StageLimits
from gencoach.logs import bound, get_logger
from gencoach.service.branching.reinjection import Reinjector
from gencoach.service.coaching.lifecycle import IN_FLIGHT
from gencoach.service.coaching.pipeline import CoachingPipeline, Dispatcher
from gencoach.service.coaching.registry import AgentRegistry
from gencoach.service.coaching.requests import CoachingRequest, RequestStore
from gencoach.service.dispatching.backlog import BacklogWatch
from gencoach.service.dispatching.holding import SlotHolder
from gencoach.service.graphs.graphstore import GraphStore, RunActivity
from gencoach.service.isolation import isolated
from gencoach.service.recovery.runends import RunEnds
from gencoach.service.runlife import RunLife

log = get_logger("reconcile")

# A corrected request still not reinjected after this long lost its reinjection (a crash).
STALE_S = 5.0
# Jobs waiting unclaimed longer than a lease (and at least BACKLOG_MIN_S) are reported.
BACKLOG_MIN_S = 5.0
# How long a finished run whose requests all ended is still looked at.
RECHECK_FOR_S = 300.0
# How often a pass reads every run it looks at from the run's own state, not the index.
REPAIR_EVERY_S = 30.0


class Reconciler:
    """The periodic pass over in-flight requests."""

    def __init__(
        self,
        store: GraphStore,
        requests: RequestStore,
        limits: StageLimits,
        coach: CoachingPipeline,
        reinjector: Reinjector,
        dispatcher: Dispatcher,
        registry: AgentRegistry,
        settings: Callable[[], Settings],
        runs: RunLife,
        every_s: float = 2.0,
    ) -> None:
        self.store = store
        self.requests = requests
        self.limits = limits
        self.coach = coach
        self.reinjector = reinjector
        self.dispatcher = dispatcher
        self.registry = registry
        self.settings = settings
        self.every_s = every_s
        self.holder = SlotHolder(limits, coach, dispatcher)
        self.backlog = BacklogWatch(BACKLOG_MIN_S)
        self.runs = runs
        self.ends = RunEnds(store.client, store.keys, requests)
        self._stopping = anyio.Event()
        # Runs seen active or finished-but-unsaved at the last pass, and when each
        # finished run was first found with every request terminal.
        self._open: set[str] = set()
        self._settled: dict[str, float] = {}
        self._repaired_at = -math.inf  # the first pass reads every run's own state

    def stop(self) -> None:
        """End the loop after the pass in hand."""
        self._stopping.set()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Reconcile every `every_s` until stopped."""
        task_status.started()
        while not self._stopping.is_set():
            started = anyio.current_time()
            try:
                await self.pass_once()
                log.debug("reconcile.pass", took_s=round(anyio.current_time() - started, 3))
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as error:
                log.warning("reconcile.redis_unavailable", error=str(error))
            except Exception:  # the next pass tries again; the controller stays up
                log.exception("reconcile.pass_failed")
            with anyio.move_on_after(min(self.every_s, self.settings().coaching.lease_s / 3)):
                await self._stopping.wait()

    async def pass_once(self) -> None:
        """One look at every run: active runs' requests, finished runs' open requests."""
        settings = self.settings()
        lease_s = settings.coaching.lease_s
        self.holder.forget_old()
        async with isolated("reconcile.backlog_failed"):
            self.backlog.bound_s = max(BACKLOG_MIN_S, lease_s)
            self.backlog.observe(await self.dispatcher.backlogs())
        # Runs applied since the last pass count as open, so their loss is noticed too.
        self._open |= self.runs.take_started()
        states = await self._states(settings.controller.saved_ttl_s)
        await self._note_lost(states)
        active = [run_id for run_id, state in states.items() if state == "active"]
        activity = await self.store.activity(active)
        for run_id, state in states.items():
            with bound(run_id=run_id):
                async with isolated("reconcile.run_failed", state=state):
                    if state == "active":
                        await self._active(
                            activity[run_id], run_id, lease_s, settings.controller.abandon_idle_s
                        )
                    elif state in ("finished", "saved") and self._unsettled(run_id):
                        await self._settle(run_id)
                    if state == "finished":
                        await self.runs.unsaved(run_id)
        self._settled = {r: at for r, at in self._settled.items() if r in states}

    async def _states(self, saved_ttl_s: int) -> dict[str, str | None]:
        """The runs a pass looks at: active and finished ones, those saved within
        `RECHECK_FOR_S`, and those seen open before, each in its state.

        The runs index gives the states. Runs seen open and no longer in it are read from
        their own state (gone: None), and every `REPAIR_EVERY_S` all of them are, which
        repairs the index (a crash between a run's write and the index's)."""
        index = self.store.index
        now_s, _ = await self.store.client.time()
        recent_ms = (now_s + saved_ttl_s - RECHECK_FOR_S) * 1000
        listed: dict[str, str | None] = dict.fromkeys(await index.in_state("active"), "active")
        listed.update(dict.fromkeys(await index.in_state("finished"), "finished"))
        for run_id in await index.saved_since(int(recent_ms)):
            listed.setdefault(run_id, "saved")
        if time.monotonic() - self._repaired_at >= REPAIR_EVERY_S:
            self._repaired_at = time.monotonic()
            return await index.repair(sorted({*listed, *self._open}))
        unlisted = sorted(self._open - listed.keys())
        return listed | (await index.repair(unlisted) if unlisted else {})

    def _unsettled(self, run_id: str) -> bool:
        # A request can still appear, or be moved on, just after its run was settled (a
        # terminal claimed from a dead controller, a reinjection in flight): a settled
        # run is looked at again for `RECHECK_FOR_S`, then no more.
        settled_at = self._settled.get(run_id)
        return settled_at is None or time.monotonic() - settled_at < RECHECK_FOR_S

    async def _settle(self, run_id: str) -> None:
        if await self.ends.settle(run_id):
            self._settled.setdefault(run_id, time.monotonic())

    async def _active(
        self, activity: RunActivity, run_id: str, lease_s: float, idle_s: float
    ) -> None:
        if activity.state != "active":
            return  # its entry in the index is behind: the next repair puts it right
        if activity.silent_s >= idle_s and await self.ends.abandon_if_idle(run_id, idle_s):
            self.runs.finished(run_id)
            return
        # Its agent was never asked (the registration failed with Redis away): ask again.
        started = None if activity.registered else await self.store.unregistered(run_id)
        if started is not None:
            self.runs.register(run_id, started.agent_url)
        for request in await self.requests.all(run_id):
            with bound(request_id=request.request_id):
                async with isolated("reconcile.request_failed", state=request.state):
                    await self._reconcile(request, lease_s)

    async def _note_lost(self, states: dict[str, str | None]) -> None:
        missing = sorted(run_id for run_id in self._open if states.get(run_id) is None)
        # A run applied after `states` was read is not lost: its state is there now.
        lost = [run_id for run_id in missing if await self.store.state(run_id) is None]
        if lost:
            log.error(
                "runs.state_lost",
                run_ids=lost,
                count=len(lost),
                reason="Redis no longer holds these active or unsaved runs (restarted "
                "without persistence?); their events from now on are dead-lettered",
            )
        open_now = {run_id for run_id, state in states.items() if state in ("active", "finished")}
        self._open = open_now | (set(missing) - set(lost))

    async def _reconcile(self, request: CoachingRequest, lease_s: float) -> None:
        run_id = request.run_id
        if request.state in IN_FLIGHT:
            await self.holder.check(request, lease_s)
        elif request.state == "corrected":
            await self.limits.renew(run_id, request.stage_id, request.request_id, lease_s)
            if _older_than(request, STALE_S):
                await self.reinjector.reinject(run_id, request.request_id)
        elif request.state == "reinjected":
            await self.reinjector.executed(run_id, request)
        elif (
            request.state == "opportunity"
            and _older_than(request, lease_s)
            and await self.registry.registered(run_id)  # else: a later pass
        ):
            await self.coach.on_terminal(run_id, request.candidate_gen_id)


def _older_than(request: CoachingRequest, age_s: float) -> bool:
    return bool(request.history) and time.time() - request.history[-1].at > age_s
