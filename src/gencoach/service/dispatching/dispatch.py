"""Handing jobs to the workers: a repair to the worker that ran its diagnosis when it
still waits (`gencoach.followups`), every other job through RQ (whose client is
synchronous: run in a thread)."""

from __future__ import annotations

import anyio
import redis

from gencoach.constants import QUEUE_DIAGNOSIS, QUEUE_REPAIR, Keys
from gencoach.followups import hand_over, handed
from gencoach.protocol.jobs import AnyJob, JobName
from gencoach.rq_adapter import Backlog, JobState, backlog, enqueue, job_state, rq_job_id
from gencoach.runtime.logs import get_logger

log = get_logger("dispatch")

QUEUES = (QUEUE_DIAGNOSIS, QUEUE_REPAIR)


class RQDispatcher:
    """Enqueues each job on its queue, with its payload as JSON and a timeout; a repair
    goes to the worker waiting for it, when one does."""

    def __init__(self, redis_url: str, keys: Keys, job_timeout_s: float) -> None:
        self.connection = redis.Redis.from_url(redis_url)
        self.keys = keys
        self.job_timeout_s = job_timeout_s

    async def dispatch(self, job: AnyJob) -> None:
        """Hand the job over or enqueue it, without blocking the event loop."""
        job_id = await anyio.to_thread.run_sync(self._dispatch, job)
        if job_id is None:
            log.info("job.handed_over", job=job.job, attempt=job.attempt)
        else:
            log.info("job.enqueued", job=job.job, job_id=job_id, attempt=job.attempt)

    def _dispatch(self, job: AnyJob) -> str | None:
        if job.job == "repair" and hand_over(
            self.connection,
            self.keys,
            job.run_id,
            job.request_id,
            job.attempt,
            job.model_dump_json(),
            job.lease.lease_s,
        ):
            return None
        return enqueue(self.connection, job, job_timeout_s=self.job_timeout_s)

    async def job_state(self, run_id: str, request_id: str, job: JobName, attempt: int) -> JobState:
        """Where that job is: waiting (on its queue, or handed to a worker that has not
        taken it yet), started by a worker, or ended."""

        def read() -> JobState:
            state = job_state(self.connection, rq_job_id(request_id, job, attempt))
            repair = state == "ended" and job == "repair"
            if repair and handed(self.connection, self.keys, run_id, request_id, attempt):
                return "waiting"
            return state

        return await anyio.to_thread.run_sync(read)

    async def backlogs(self) -> list[Backlog]:
        """The backlog of every queue jobs are put on."""

        def read() -> list[Backlog]:
            return [backlog(self.connection, queue) for queue in QUEUES]

        return await anyio.to_thread.run_sync(read)
