"""Who keeps an in-flight request's pending slot: the controller while its job waits, the
worker from the moment it takes the job.

`SlotHolder` renews the leases of queued jobs and retries requests whose holder died.
"""

from __future__ import annotations

from gencoach.limits import StageLimits
from gencoach.runtime.logs import get_logger
from gencoach.service.coaching.lifecycle import RUNNING
from gencoach.service.coaching.requests import CoachingRequest, job_of
from gencoach.service.pipeline import CoachingPipeline, Dispatcher

log = get_logger("holding")


class SlotHolder:
    """Renews the leases of queued jobs, and retries requests whose holder died.

    A request's lease must last as long as the request is alive anywhere, and lapse only
    when its holder is dead. The request's own state says who holds it:

    - **queued**: its job waits on its queue, and the controller renews the lease whenever
      it looks (every third of a lease), however long the queue is. If it finds the lease
      gone (the controller itself was down longer than a lease), it takes the slot again
      under the limits in force. A job that is no longer on its queue while its request is
      still queued was taken by a worker that has not reported yet (milliseconds), or that
      died before it could: the controller stops renewing, and a lapsed lease is retried.
    - **running** (`diagnosing`, `repairing`, `rewriting`): the worker moved the request
      there in the call that first renewed its lease (`gencoach.workers.lease`), and renews
      it every third of a lease. A worker that dies lets it lapse within a lease, and the
      request is retried, up to its `max_attempts`.

    Nothing here asks RQ whether a job started: only whether a queued request's job still
    waits, which is the one thing its request's state cannot say.
    """

    def __init__(
        self, limits: StageLimits, coach: CoachingPipeline, dispatcher: Dispatcher
    ) -> None:
        self.limits = limits
        self.coach = coach
        self.dispatcher = dispatcher

    async def check(self, request: CoachingRequest, lease_s: float) -> None:
        """Keep the request's slot if its holder lives, else retry the request."""
        job = job_of(request)
        if job is None:  # admitted, its job not yet saved: the admission's lease holds
            return
        if request.state == "queued":
            state = await self.dispatcher.job_state(
                request.run_id, request.request_id, job, request.attempt
            )
            if state == "waiting":
                await self.keep(request, lease_s, "the lease lapsed in queue")
                return
        if not await self.limits.lease_alive(request.run_id, request.stage_id, request.request_id):
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
