"""What the controller reads of the RQ queues: where a job is, and which queues back up.

RQ's client is synchronous: these functions are called through `anyio.to_thread.run_sync`.
A queue backs up when its oldest job has waited longer than a bound without a worker
taking it; `BacklogWatch` then logs one warning for that queue (and one line when it
drains), not one per pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

import redis
from rq import Queue, Worker
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus

from gencoach.logs import get_logger

log = get_logger("queues")

JobState = Literal["waiting", "started", "ended"]
_WAITING = frozenset({JobStatus.QUEUED, JobStatus.DEFERRED, JobStatus.SCHEDULED})


def rq_job_state(connection: redis.Redis, rq_id: str) -> JobState:
    """`waiting` on its queue, `started` by a worker, or `ended` (finished, failed, unknown)."""
    try:
        status = Job.fetch(rq_id, connection=connection).get_status()
    except NoSuchJobError:
        return "ended"
    if status in _WAITING:
        return "waiting"
    return "started" if status == JobStatus.STARTED else "ended"


@dataclass(frozen=True)
class Backlog:
    """One queue's waiting jobs: how many, how long the oldest has waited, its workers."""

    queue: str
    jobs: int
    oldest_wait_s: float
    workers: int

    def describe(self) -> str:
        """The sentence an operator reads in the warning."""
        waited = f"{self.jobs} jobs waiting for {self.oldest_wait_s:.0f} s"
        if self.workers == 0:
            return f"no worker is consuming {self.queue}: {waited}"
        return f"{self.queue}: {waited}; its {self.workers} worker(s) are all busy"


def rq_backlog(connection: redis.Redis, queue_name: str) -> Backlog:
    """The queue's backlog now (an empty queue has waited 0 s)."""
    queue = Queue(queue_name, connection=connection)
    jobs = queue.count
    oldest_wait_s = 0.0
    if jobs:
        head = queue.get_job_ids(0, 1)
        job = queue.fetch_job(head[0]) if head else None
        if job is not None and job.enqueued_at is not None:
            enqueued = job.enqueued_at
            if enqueued.tzinfo is None:  # RQ stores UTC without a zone
                enqueued = enqueued.replace(tzinfo=UTC)
            oldest_wait_s = max(0.0, (datetime.now(UTC) - enqueued).total_seconds())
    workers = Worker.count(connection=connection, queue=queue)
    return Backlog(queue_name, jobs, oldest_wait_s, workers)


@dataclass
class BacklogWatch:
    """Warns once per queue while its jobs wait unclaimed longer than `bound_s`."""

    bound_s: float
    backed_up: set[str] = field(default_factory=set)

    def observe(self, backlogs: list[Backlog]) -> list[Backlog]:
        """Log what changed; return the queues newly found backed up."""
        warned = []
        for backlog in backlogs:
            late = backlog.jobs > 0 and backlog.oldest_wait_s > self.bound_s
            if late and backlog.queue not in self.backed_up:
                self.backed_up.add(backlog.queue)
                warned.append(backlog)
                log.warning(
                    "queue.backlog",
                    queue=backlog.queue,
                    jobs=backlog.jobs,
                    waiting_s=round(backlog.oldest_wait_s, 1),
                    workers=backlog.workers,
                    message=backlog.describe(),
                )
            elif not late and backlog.queue in self.backed_up:
                self.backed_up.discard(backlog.queue)
                log.info("queue.caught_up", queue=backlog.queue, jobs=backlog.jobs)
        return warned
