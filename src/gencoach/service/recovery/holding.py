"""Who keeps an in-flight request's pending slot: the controller while its job waits, the
worker while it runs.

A request's lease must last as long as the request is alive anywhere, and lapse only
when its holder is dead. The lease follows the job's RQ state:

- **waiting** on its queue: the controller is the holder and renews the lease on every
  reconciliation pass (every third of a lease), however long the queue is. If it finds
  the lease gone (the controller itself was down longer than a lease), it takes the
  slot again under the limits in force.
- **started**: the worker is the holder; its job renews the lease before any work and
  then every third of a lease (`gencoach.workers.lease`). So that a worker that is slow
  to start the job (a loaded machine, a cold process) does not lose the slot in the
  hand-over, the controller keeps renewing for one more lease after it first sees the
  job started. A worker that dies then lets the lease lapse within two leases at most,
  and the request is retried, up to its `max_attempts`.
- **ended** (or unknown to RQ): the result is on its way or the job was lost; a lapsed
  lease then means the holder died, and the request is retried.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio

from gencoach.limits import StageLimits
from gencoach.logs import get_logger
from gencoach.service.coaching.lifecycle import RUNNING
from gencoach.service.coaching.requests import CoachingRequest, job_of
from gencoach.service.pipeline import CoachingPipeline, Dispatcher

log = get_logger("holding")

# How long the controller remembers when it first saw a job started; past it, seeing it
# started again only repeats a hand-over renewal, which cannot revive a lapsed lease.
FORGET_AFTER_S = 3_600.0


class SlotHolder:
    """Renews the leases of queued jobs and of jobs being handed over to a worker."""

    def __init__(
        self,
        limits: StageLimits,
        coach: CoachingPipeline,
        dispatcher: Dispatcher,
        clock: Callable[[], float] = anyio.current_time,
    ) -> None:
        self.limits = limits
        self.coach = coach
        self.dispatcher = dispatcher
        self.clock = clock
        self._started_seen: dict[tuple[str, str, int], float] = {}

    async def check(self, request: CoachingRequest, lease_s: float) -> None:
        """Keep the request's slot if its holder lives, else retry the request."""
        run_id, stage_id, request_id = request.run_id, request.stage_id, request.request_id
        job = job_of(request)
        if job is None:  # admitted, its job not yet saved: the admission's lease holds
            return
        state = await self.dispatcher.job_state(request_id, job, request.attempt)
        key = (request_id, job, request.attempt)
        if state == "waiting":
            await self.keep(request, lease_s, "the lease lapsed in queue")
            return
        if state == "started":
            await self.coach.started(request)
            now = self.clock()
            first_seen = self._started_seen.setdefault(key, now)
            if now - first_seen < lease_s:
                await self.limits.renew(run_id, stage_id, request_id, lease_s)
                return
        else:
            self._started_seen.pop(key, None)
        if not await self.limits.lease_alive(run_id, stage_id, request_id):
            reason = f"the {RUNNING[job]} worker's lease lapsed"
            await self.coach.retry(request, reason)

    async def keep(self, request: CoachingRequest, lease_s: float, lapsed: str) -> None:
        """Renew the slot of a request nothing else holds (its job waits on its queue, or
        its correction waits to be reinjected); a lapsed one (a controller down longer
        than a lease) is admitted again, or its loss logged when the stage is full."""
        # A renewal is the common case and costs a third of an admission, which also
        # counts the stage; only a lapsed lease is admitted again.
        if await self.limits.renew(request.run_id, request.stage_id, request.request_id, lease_s):
            return
        admission = await self.coach.admit_lease(request)
        if admission.outcome == "admitted":
            log.warning("holding.slot_retaken", state=request.state, reason=lapsed)
        elif not admission.admitted:
            log.warning("holding.slot_lost", state=request.state, reason=admission.reason)

    def forget_old(self) -> None:
        """Drop hand-over times too old to matter (called once per pass)."""
        horizon = self.clock() - FORGET_AFTER_S
        for key, seen in list(self._started_seen.items()):
            if seen < horizon:
                del self._started_seen[key]
