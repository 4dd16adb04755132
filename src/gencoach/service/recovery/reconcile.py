"""Reconciliation: requests whose worker died are retried or abandoned, never lost.

Workers renew their request's lease while they work. Every request not yet ended has
a deadline in a sorted set (`Keys.request_deadlines`): each move of the request puts it a
couple of seconds ahead, so a request that moves on as it should is never looked at, and
every `every_s` (at most a third of a lease) the controller looks at those whose deadline
came, and only those. One in flight keeps its slot while its holder lives and is
dispatched again when it does not (see `gencoach.service.recovery.holding`); one answered
and awaiting reinjection keeps its pending slot, so the controller renews its lease, and
is handed to the reinjector, which reinjects it in a task of its own as it does a fresh
correction; one left as a bare opportunity by a crash is routed again. Each look sets
the next one. Queues whose jobs wait unclaimed too long are reported once each. RQ's own
recovery of a killed job is far slower and is not waited for.

Finished runs are visited until every request they have is terminal (`RunEnds`), and
saved runs for `RECHECK_FOR_S` after their save. Every `controller.sweep_s` (120 s) a
sweep also looks at every active run: one that fell silent is finished as abandoned, one
whose agent was never asked is registered, and a run seen open but missing from the runs
index is indexed again. Every `REPAIRS`-th sweep, and at once after Redis restarted (its `run_id`
changed), every open run's entry in the index is checked against its own state (runs
whose keys expired leave it), and runs whose state vanished while still active or
unsaved are named in the log. So a pass costs the requests whose deadline came and the
finished runs; only a sweep costs every open run.
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
from gencoach.runtime.logs import bound, get_logger
from gencoach.service.branching.reinjection import Reinjector
from gencoach.service.coaching.lifecycle import IN_FLIGHT, TERMINAL
from gencoach.service.coaching.registry import AgentRegistry
from gencoach.service.coaching.requests import CoachingRequest, RequestStore
from gencoach.service.dispatching.backlog import BacklogWatch
from gencoach.service.isolation import isolated
from gencoach.service.pipeline import CoachingPipeline, Dispatcher
from gencoach.service.recovery.holding import SlotHolder
from gencoach.service.recovery.runends import RunEnds
from gencoach.service.runlife import RunLife
from gencoach.service.store.graphstore import GraphStore, RunActivity

log = get_logger("reconcile")

# A corrected request still not reinjected after this long lost its reinjection (a crash).
STALE_S = 5.0
# Jobs waiting unclaimed longer than a lease (and at least BACKLOG_MIN_S) are reported.
BACKLOG_MIN_S = 5.0
# How long a finished run whose requests all ended is still looked at.
RECHECK_FOR_S = 300.0
# Every REPAIRS-th sweep reads every open run's own state against the runs index (and
# finds runs whose state was lost); so does the first sweep after Redis restarted.
REPAIRS = 5
# The most requests one pass looks at (the soonest due first; the rest the next pass).
DUE_PER_PASS = 1_000


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
        self.ends = RunEnds(store.client, store.keys, requests, store)
        self._stopping = anyio.Event()
        # Runs seen active or finished-but-unsaved at the last pass, and when each
        # finished run was first found with every request terminal.
        self._open: set[str] = set()
        self._settled: dict[str, float] = {}
        # The first pass sweeps and repairs.
        self._swept_at = self._repaired_at = -math.inf
        self._redis_run_id: str | None = None

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
        """One pass: the runs with open requests, the finished and recently saved runs,
        and, every `controller.sweep_s` (sooner for a short `abandon_idle_s`), every active
        run; every `REPAIRS` sweeps, or once Redis restarted, every open run's own state."""
        settings = self.settings()
        lease_s = settings.coaching.lease_s
        idle_s = settings.controller.abandon_idle_s
        async with isolated("reconcile.backlog_failed"):
            self.backlog.bound_s = max(BACKLOG_MIN_S, lease_s)
            self.backlog.observe(await self.dispatcher.backlogs())
        # Runs applied since the last pass count as open, so their loss is noticed too.
        self._open |= self.runs.take_started()
        now = time.monotonic()
        sweep_s = min(settings.controller.sweep_s, idle_s / 2)
        repair = await self._redis_restarted() or now - self._repaired_at >= REPAIRS * sweep_s
        sweep = repair or now - self._swept_at >= sweep_s
        states = await self._states(settings.controller.saved_ttl_s, sweep, repair)
        if repair:
            self._repaired_at = now
            await self._note_lost(states)
        if sweep:
            self._swept_at = now
            active = [run_id for run_id, state in states.items() if state == "active"]
            activity = await self.store.activity(active)
            for run_id in active:
                with bound(run_id=run_id):
                    async with isolated("reconcile.run_failed", state="active"):
                        await self._watch(activity[run_id], run_id, idle_s)
        for run_id, state in states.items():
            with bound(run_id=run_id):
                async with isolated("reconcile.run_failed", state=state):
                    if state in ("finished", "saved") and self._unsettled(run_id):
                        await self._settle(run_id)
                    if state == "finished":
                        await self.runs.unsaved(run_id)
        self._settled = {r: at for r, at in self._settled.items() if r in states}
        for run_id, request_id in await self.requests.due(DUE_PER_PASS):
            with bound(run_id=run_id, request_id=request_id):
                async with isolated("reconcile.request_failed"):
                    # A run neither finished nor recently saved is active (or gone: its
                    # requests are too, and are no longer looked at).
                    await self._due(run_id, request_id, states.get(run_id, "active"), lease_s)

    async def _states(self, saved_ttl_s: int, sweep: bool, repair: bool) -> dict[str, str | None]:
        """The runs a pass looks at, each in its state: the finished ones and those saved
        within `RECHECK_FOR_S`; on a sweep also the active ones.

        The runs index gives the states. A sweep reads the runs seen open and missing from
        the index from their own state (gone: None), which indexes them again (a crash
        between a run's write and the index's); a repair reads every run listed or seen
        open that way, which also finds the runs whose state was lost."""
        index = self.store.index
        now_s, _ = await self.store.client.time()
        recent_ms = (now_s + saved_ttl_s - RECHECK_FOR_S) * 1000
        listed: dict[str, str | None] = dict.fromkeys(await index.in_state("finished"), "finished")
        for run_id in await index.saved_since(int(recent_ms)):
            listed.setdefault(run_id, "saved")
        if not sweep:
            return listed
        listed.update(dict.fromkeys(await index.in_state("active"), "active"))
        if repair:
            return await index.repair(sorted({*listed, *self._open}))
        unlisted = sorted(self._open - listed.keys())
        return listed | (await index.repair(unlisted) if unlisted else {})

    async def _redis_restarted(self) -> bool:
        """Whether Redis restarted since the last pass (its `run_id` changed): runs may
        have lost their state, so the pass repairs."""
        run_id = str((await self.store.client.info("server"))["run_id"])
        restarted = self._redis_run_id is not None and run_id != self._redis_run_id
        self._redis_run_id = run_id
        return restarted

    def _unsettled(self, run_id: str) -> bool:
        # A request can still appear, or be moved on, just after its run was settled (a
        # terminal claimed from a dead controller, a reinjection in flight): a settled
        # run is looked at again for `RECHECK_FOR_S`, then no more.
        settled_at = self._settled.get(run_id)
        return settled_at is None or time.monotonic() - settled_at < RECHECK_FOR_S

    async def _settle(self, run_id: str) -> None:
        settled = await self.ends.settle(run_id)
        if settled.ended:  # its save may already hold these requests open
            await self.runs.requests_moved(run_id)
        if settled.done:
            self._settled.setdefault(run_id, time.monotonic())

    async def _watch(self, activity: RunActivity, run_id: str, idle_s: float) -> None:
        """A sweep's look at an active run: finished as abandoned once silent for
        `idle_s`; its agent asked again if it never was (a registration lost to a crash)."""
        if activity.state != "active":
            return  # its entry in the index is behind: the repair puts it right
        if activity.silent_s >= idle_s and await self.ends.abandon_if_idle(run_id, idle_s):
            self.runs.finished(run_id)
            return
        started = None if activity.registered else await self.store.unregistered(run_id)
        if started is not None:
            self.runs.register(run_id, started.agent_url)

    async def _due(
        self, run_id: str, request_id: str, run_state: str | None, lease_s: float
    ) -> None:
        """Look at a request whose deadline came: move it on if it waits on something lost,
        and set when to look again (`_next_look_s`)."""
        request = await self.requests.get(run_id, request_id)
        if request is None or request.state in TERMINAL or request.state == "executed":
            # Ended, gone with its run, or waiting for an outcome that needs no watch.
            await self.requests.unwatch(run_id, request_id)
            return
        if run_state != "active":  # a finished run's requests are ended by `_settle`
            await self.requests.watch(request, lease_s)
            return
        await self._reconcile(request, lease_s)
        # Only while still watched: a request the look ended is not watched again.
        await self.requests.watch(request, self._next_look_s(request, lease_s), xx=True)

    def _next_look_s(self, request: CoachingRequest, lease_s: float) -> float:
        """How long until a request in its state needs a look: a job's slot is renewed, or
        found lapsed, within a third of a lease; a correction not yet reinjected is handed
        over after `STALE_S`; a branch is checked for its execution every pass; a bare
        opportunity is routed again after a lease."""
        if request.state in IN_FLIGHT:
            return lease_s / 3
        if request.state == "corrected":
            return min(STALE_S, lease_s / 3)
        if request.state == "reinjected":
            return self.every_s
        return lease_s

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
            await self.holder.keep(request, lease_s, "the lease lapsed awaiting reinjection")
            if _older_than(request, STALE_S):
                # Its own task, beside every other run's: one slow agent never holds up
                # the pass, nor another run's recovery, nor the leases it renews.
                self.reinjector.submit(request)
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
