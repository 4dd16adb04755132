"""Handing jobs to the workers through RQ (whose client is synchronous: run in a thread)."""

from __future__ import annotations

from functools import partial

import anyio
import redis

from gencoach.logs import get_logger
from gencoach.protocol.jobs import AnyJob, JobName
from gencoach.workers.pool import enqueue, rq_job_id, waiting

log = get_logger("dispatch")


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

    async def waiting(self, request_id: str, job: JobName, attempt: int) -> bool:
        """Whether that job still waits on its queue for a worker."""
        call = partial(waiting, self.connection, rq_job_id(request_id, job, attempt))
        return await anyio.to_thread.run_sync(call)
