"""Handing jobs to the workers through RQ (whose client is synchronous: run in a thread)."""

from __future__ import annotations

from functools import partial

import anyio
import redis

from gencoach.constants import QUEUE_DIAGNOSIS, QUEUE_REPAIR
from gencoach.protocol.jobs import AnyJob, JobName
from gencoach.rq_adapter import Backlog, JobState, backlog, enqueue, job_state, rq_job_id
from gencoach.runtime.logs import get_logger

log = get_logger("dispatch")

QUEUES = (QUEUE_DIAGNOSIS, QUEUE_REPAIR)


class RQDispatcher:
    """Enqueues each job on its queue, with its payload as JSON and a timeout."""

    def __init__(self, redis_url: str, job_timeout_s: float) -> None:
        self.connection = redis.Redis.from_url(redis_url)
        self.job_timeout_s = job_timeout_s

    async def dispatch(self, job: AnyJob) -> None:
        """Enqueue a job without blocking the event loop."""
        call = partial(enqueue, self.connection, job, job_timeout_s=self.job_timeout_s)
        job_id = await anyio.to_thread.run_sync(call)
        log.info("job.enqueued", job=job.job, job_id=job_id, attempt=job.attempt)

    async def job_state(self, request_id: str, job: JobName, attempt: int) -> JobState:
        """Where that job is: waiting on its queue, started by a worker, or ended."""
        call = partial(job_state, self.connection, rq_job_id(request_id, job, attempt))
        return await anyio.to_thread.run_sync(call)

    async def backlogs(self) -> list[Backlog]:
        """The backlog of every queue jobs are put on."""

        def read() -> list[Backlog]:
            return [backlog(self.connection, queue) for queue in QUEUES]

        return await anyio.to_thread.run_sync(read)
