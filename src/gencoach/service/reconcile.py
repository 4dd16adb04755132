"""Reconciliation: requests whose worker died are retried or abandoned, never lost.

Workers renew their request's lease while they work. Every `every_s` (at most a third
of a lease) the controller looks at its runs' requests: one in flight keeps its slot
while its holder lives and is dispatched again when it does not (see
`gencoach.service.holding`); one answered and awaiting reinjection keeps its pending
slot, so the controller renews its lease; one left as a bare opportunity by a crash is
routed again. Queues whose jobs wait unclaimed too long are reported once each. RQ's
own recovery of a killed job is far slower and is not waited for.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio
import redis.exceptions
from anyio.abc import TaskStatus

from gencoach.config import Settings
from gencoach.limits import StageLimits
from gencoach.logs import bound, get_logger
from gencoach.service.coach import Coach
from gencoach.service.graphstore import GraphStore
from gencoach.service.holding import SlotHolder
from gencoach.service.isolation import isolated
from gencoach.service.queues import BacklogWatch
from gencoach.service.requests import IN_FLIGHT, CoachingRequest, RequestStore

log = get_logger("reconcile")

# A corrected request still not reinjected after this long lost its reinjection (a crash).
STALE_S = 5.0
# Jobs waiting unclaimed longer than a lease (and at least BACKLOG_MIN_S) are reported.
BACKLOG_MIN_S = 5.0


class Reconciler:
    """The periodic pass over in-flight requests."""

    def __init__(
        self,
        store: GraphStore,
        requests: RequestStore,
        limits: StageLimits,
        coach: Coach,
        settings: Callable[[], Settings],
        every_s: float = 2.0,
    ) -> None:
        self.store = store
        self.requests = requests
        self.limits = limits
        self.coach = coach
        self.settings = settings
        self.every_s = every_s
        self.holder = SlotHolder(limits, coach)
        self.backlog = BacklogWatch(BACKLOG_MIN_S)
        self._stopping = anyio.Event()

    def stop(self) -> None:
        """End the loop after the pass in hand."""
        self._stopping.set()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Reconcile every `every_s` until stopped."""
        task_status.started()
        while not self._stopping.is_set():
            try:
                await self.pass_once()
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as error:
                log.warning("reconcile.redis_unavailable", error=str(error))
            with anyio.move_on_after(min(self.every_s, self.settings().coaching.lease_s / 3)):
                await self._stopping.wait()

    async def pass_once(self) -> None:
        """One look at every active run's requests."""
        lease_s = self.settings().coaching.lease_s
        self.holder.forget_old()
        async with isolated("reconcile.backlog_failed"):
            self.backlog.bound_s = max(BACKLOG_MIN_S, lease_s)
            self.backlog.observe(await self.coach.dispatcher.backlogs())
        for run_id in await self.store.runs_in_state("active"):
            for request in await self.requests.all(run_id):
                with bound(run_id=run_id, request_id=request.request_id):
                    async with isolated("reconcile.request_failed", state=request.state):
                        await self._reconcile(request, lease_s)

    async def _reconcile(self, request: CoachingRequest, lease_s: float) -> None:
        run_id = request.run_id
        if request.state in IN_FLIGHT:
            await self.holder.check(request, lease_s)
        elif request.state == "corrected":
            await self.limits.renew(run_id, request.stage_id, request.request_id, lease_s)
            if _older_than(request, STALE_S):
                await self.coach.reinjector.reinject(run_id, request.request_id)
        elif request.state == "reinjected":
            await self.coach.reinjector.executed(run_id, request)
        elif request.state == "opportunity" and _older_than(request, lease_s):
            await self.coach.on_terminal(run_id, request.candidate_gen_id)


def _older_than(request: CoachingRequest, age_s: float) -> bool:
    return bool(request.history) and time.time() - request.history[-1].at > age_s
