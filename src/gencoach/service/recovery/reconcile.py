"""Reconciliation: requests whose worker died are retried or abandoned, never lost.

`Reconciler` passes every `every_s` over what came due (requests past their deadline, runs
fallen silent or never registered), the finished and recently saved runs, and a slice of
the runs seen open; no pass reads every open run. See docs/operations.md, "Redis restarts
and persistence".
"""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio
import redis.exceptions
from anyio.abc import TaskStatus

from gencoach.config import Settings
from gencoach.limits import StageLimits
from gencoach.runtime.logs import bound, get_logger
from gencoach.service.branching.reinjection import STALE_S, Reinjector
from gencoach.service.coaching.lifecycle import IN_FLIGHT, MAY_ORDER
from gencoach.service.coaching.registry import AgentRegistry
from gencoach.service.coaching.requests import CoachingRequest, RequestStore
from gencoach.service.dispatching.backlog import BacklogWatch
from gencoach.service.isolation import isolated
from gencoach.service.pipeline import CoachingPipeline, Dispatcher
from gencoach.service.recovery.holding import SlotHolder
from gencoach.service.recovery.runends import RunEnds
from gencoach.service.runlife import RunLife
from gencoach.service.store.graphstore import GraphStore
from gencoach.service.store.watches import now_ms

log = get_logger("reconcile")

# Jobs waiting unclaimed longer than a lease (and at least BACKLOG_MIN_S) are reported.
BACKLOG_MIN_S = 5.0
# How long a finished run whose requests all ended is still looked at.
RECHECK_FOR_S = 300.0
# The most requests, silent runs and due registrations one pass looks at, each (the
# soonest due first; the rest the next pass).
DUE_PER_PASS = 1_000
# Runs seen open checked against the runs index per pass (all of them in turn).
OPEN_CHECKS = 25


class Reconciler:
    """The periodic pass over in-flight requests.

    Workers renew their request's lease while they work. Every request that may still
    order a branch (`MAY_ORDER`) has a deadline in a sorted set
    (`Keys.request_deadlines`): each move of the request (but a job's take, which the look
    its queueing set covers) puts it ahead (`next_look_s`), so
    a request that moves on as it should is seldom looked at,
    and every `every_s` (at most a third of a lease) the controller looks at those whose
    deadline came, and only those (`_due`); each look sets the next one. Queues whose jobs
    wait unclaimed too long are reported once each. RQ's own recovery of a killed job is
    far slower and is not waited for.

    Finished runs are visited until every request they have is terminal (`RunEnds`), and
    saved runs for `RECHECK_FOR_S` after their save. Open runs are found the way requests
    are, through deadlines in sorted sets (`RunWatches`): the runs silent for
    `controller.abandon_idle_s` (`_silent`) and those whose registration came due
    (`_unregistered`). No pass reads every open run: a pass costs the requests whose
    deadline came, the finished runs, the runs come due, and a fixed slice of the open
    ones.

    The runs index is written just after a run's own state (it lives in another hash slot,
    so no script writes both), and a crash in between leaves the index behind (what
    repairs it: `RunIndex`). A pass does its part: a run abandoned without the index told
    still holds its `heard` entry (it leaves `heard` only after the index has its end), and
    the look that finds it no longer active puts its entry right (`_silent`); each pass
    checks `OPEN_CHECKS` of the runs this controller saw open against the index, in turn
    (`_check_open`); and the first pass after Redis restarted (its `run_id` changed) checks
    every run seen open at once and names those whose state was lost (`_note_lost`).
    """

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
        self._unchecked: list[str] = []  # the runs seen open left to check in this turn
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
        """One pass: the requests whose deadline came, the finished and recently saved
        runs, the runs fallen silent and those whose registration came due, and a slice
        of the runs seen open (all of them once Redis restarted)."""
        settings = self.settings()
        lease_s = settings.coaching.lease_s
        async with isolated("reconcile.backlog_failed"):
            self.backlog.bound_s = max(BACKLOG_MIN_S, lease_s)
            self.backlog.observe(await self.dispatcher.backlogs())
        # Runs applied since the last pass count as open, so their loss is noticed too.
        self._open |= self.runs.take_started()
        states = await self._states(settings.controller.saved_ttl_s)
        if await self._redis_restarted():
            states = await self.store.index.repair(sorted({*states, *self._open}))
            await self._note_lost(states)
        else:
            await self._check_open()
        # A saved run is no longer open (what is left of it expires with its keys).
        self._open -= {run_id for run_id, state in states.items() if state == "saved"}
        async with isolated("reconcile.silent_failed"):
            await self._silent(settings.controller.abandon_idle_s)
        async with isolated("reconcile.registrations_failed"):
            await self._unregistered()
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

    async def _states(self, saved_ttl_s: int) -> dict[str, str | None]:
        """The finished runs and those saved within `RECHECK_FOR_S`, as the runs index
        lists them."""
        index = self.store.index
        now_s, _ = await self.store.client.time()
        recent_ms = (now_s + saved_ttl_s - RECHECK_FOR_S) * 1000
        listed: dict[str, str | None] = dict.fromkeys(await index.in_state("finished"), "finished")
        for run_id in await index.saved_since(int(recent_ms)):
            listed.setdefault(run_id, "saved")
        return listed

    async def _redis_restarted(self) -> bool:
        """Whether Redis restarted since the last pass (its `run_id` changed): runs may
        have lost their state, so the pass repairs."""
        run_id = str((await self.store.client.info("server"))["run_id"])
        restarted = self._redis_run_id is not None and run_id != self._redis_run_id
        self._redis_run_id = run_id
        return restarted

    async def _check_open(self) -> None:
        """Check the next `OPEN_CHECKS` runs seen open against the runs index (each is
        indexed again as its own state says, if its entry is missing or behind); those
        saved or gone are no longer open. Every run seen open is checked in turn."""
        if not self._unchecked:
            self._unchecked = sorted(self._open)
        batch = [run_id for run_id in self._unchecked[:OPEN_CHECKS] if run_id in self._open]
        del self._unchecked[:OPEN_CHECKS]
        if not batch:
            return
        states = await self.store.index.repair(batch)
        lost = [run_id for run_id, state in states.items() if state is None]
        if lost:
            _log_lost(lost)
        self._open -= {run_id for run_id, state in states.items() if state in (None, "saved")}

    async def _silent(self, idle_s: float) -> None:
        """Finish as abandoned the runs silent for `idle_s`, as their deadline in
        `Keys.heard` says, and only those: one heard from meanwhile is moved to when it
        was, one no longer active is no longer watched (its entry in the runs index is
        put right first: a crash may have left its end out).

        An active run is scored by when it last heard from its generator, so only the runs
        silent for `idle_s` are read; `RunEnds.abandon_if_idle` decides on each, on the
        run's own state.
        """
        watches = self.store.watches
        due = await watches.silent(idle_s, DUE_PER_PASS)
        if not due:
            return
        activity = await self.store.activity([run_id for run_id, _ in due])
        at_ms = now_ms()
        heard: dict[str, int] = {}
        ended: list[str] = []
        for run_id, _ in due:
            seen = activity[run_id]
            if seen.state != "active":
                continue
            if seen.silent_s < idle_s:  # the score, in the writer's clock, of when it was
                heard[run_id] = at_ms - int(seen.silent_s * 1000)
                continue
            with bound(run_id=run_id):
                async with isolated("reconcile.run_failed", state="active"):
                    if await self.ends.abandon_if_idle(run_id, idle_s):
                        self.runs.finished(run_id)
                        ended.append(run_id)
        await watches.still_heard(heard)
        await watches.ended(ended)
        inactive = [(run_id, score) for run_id, score in due if activity[run_id].state != "active"]
        if inactive:
            await self.store.index.repair([run_id for run_id, _ in inactive])
            await watches.forget_heard(inactive)

    async def _unregistered(self) -> None:
        """Register the runs whose registration came due without ending (lost to a crash,
        or to Redis away), each claimed first so that no other controller registers it
        too; runs that wait for none are no longer watched.

        A run's registration comes due a few seconds after its start unless a live
        controller registers it and keeps its deadline ahead (`RunLife`).
        """
        watches = self.store.watches
        due = await watches.unregistered(DUE_PER_PASS)
        if not due:
            return
        waiting = await self.store.unregistered([run_id for run_id, _ in due])
        claimed = await watches.claim_registrations([item for item in due if item[0] in waiting])
        for run_id in claimed:
            self.runs.register(run_id, waiting[run_id].agent_url)
        if claimed:
            log.info("runs.registration_resumed", runs=len(claimed))
        await watches.forget_registration([item for item in due if item[0] not in waiting])

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

    async def _due(
        self, run_id: str, request_id: str, run_state: str | None, lease_s: float
    ) -> None:
        """Look at a request whose deadline came: move it on if it waits on something lost,
        and set when to look again (`next_look_s`)."""
        request = await self.requests.get(run_id, request_id)
        if request is None or request.state not in MAY_ORDER:
            # Ended, gone with its run, or waiting for an outcome that needs no watch.
            await self.requests.unwatch(run_id, request_id)
            return
        if run_state != "active":  # a finished run's requests are ended by `_settle`
            await self.requests.watch(request, lease_s)
            return
        await self._reconcile(request, lease_s)
        # Only while still watched: a request the look ended is not watched again.
        await self.requests.watch(request, next_look_s(request, lease_s), xx=True)

    async def _note_lost(self, states: dict[str, str | None]) -> None:
        missing = sorted(run_id for run_id in self._open if states.get(run_id) is None)
        # A run applied after `states` was read is not lost: its state is there now.
        lost = [run_id for run_id in missing if await self.store.state(run_id) is None]
        if lost:
            _log_lost(lost)
        open_now = {run_id for run_id, state in states.items() if state in ("active", "finished")}
        self._open = open_now | (set(missing) - set(lost))

    async def _reconcile(self, request: CoachingRequest, lease_s: float) -> None:
        """Move on a request of an active run that waits on something lost.

        One in flight keeps its slot while its holder lives and is dispatched again when it
        does not (`SlotHolder`). One answered and awaiting reinjection keeps its pending
        slot, so the controller renews its lease, and is handed to the reinjector, which
        reinjects it in a task of its own as it does a fresh correction. One left as a bare
        opportunity by a crash is routed again.
        """
        run_id = request.run_id
        if request.state in IN_FLIGHT:
            await self.holder.check(request, lease_s)
        elif request.state == "corrected":
            await self.holder.keep(request, lease_s, "the lease lapsed awaiting reinjection")
            if _older_than(request, STALE_S):
                # Its own task, beside every other run's: one slow agent never holds up
                # the pass, nor another run's recovery, nor the leases it renews.
                self.reinjector.submit(request)
        elif (
            request.state == "opportunity"
            and _older_than(request, lease_s)
            and await self.registry.registered(run_id)  # else: a later pass
        ):
            await self.coach.on_terminal(run_id, request.candidate_gen_id, request.candidate_id)


def next_look_s(request: CoachingRequest, lease_s: float) -> float:
    """How long until a request in its state needs a look: a job's slot is renewed, or
    found lapsed, within a third of a lease; a correction not yet reinjected is handed
    over after `STALE_S`; a bare opportunity is routed again after a lease. A request past
    these states is not watched (`MAY_ORDER`)."""
    if request.state in IN_FLIGHT:
        return lease_s / 3
    if request.state == "corrected":
        return min(STALE_S, lease_s / 3)
    return lease_s


def _log_lost(run_ids: list[str]) -> None:
    log.error(
        "runs.state_lost",
        run_ids=run_ids,
        count=len(run_ids),
        reason="Redis no longer holds these active or unsaved runs (restarted "
        "without persistence?); their events from now on are dead-lettered",
    )


def _older_than(request: CoachingRequest, age_s: float) -> bool:
    return bool(request.history) and time.time() - request.history[-1].at > age_s
