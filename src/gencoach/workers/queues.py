"""The RQ queues: putting jobs on them, and taking them off in priority order, atomically.

Every worker process serves every gencoach queue, first to last (repair before
diagnosis, so that corrections already under way finish first). RQ's own multi-queue
dequeue is a plain BLPOP (RQ issue #1716): a worker that dies between the pop and the
started registry loses the job without a trace. Here one Lua script moves the job from
its queue into RQ's intermediate list in a single step, as RQ does for one queue, so
RQ's maintenance recovers it.

Idle workers block on a doorbell list that `enqueue` pushes a token to, with a short
timeout for jobs RQ itself puts back (retries, `rq requeue`) without ringing.
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from typing import Any, Final

import redis
import redis.asyncio
from rq import Queue
from rq.exceptions import DequeueTimeout, DuplicateJobError, NoSuchJobError
from rq.intermediate_queue import IntermediateQueue
from rq.job import Job, JobStatus

from gencoach.constants import QUEUE_DIAGNOSIS, QUEUE_DOORBELL, QUEUE_REPAIR
from gencoach.logs import get_logger
from gencoach.protocol.jobs import AnyJob, JobName

RESULT_TTL_S = 3_600  # a finished job id is kept this long: enqueuing it again is a no-op
FAILURE_TTL_S = 86_400
# RQ's own time limit comes this long after the job's, which reports an error first.
TIMEOUT_MARGIN_S = 30
# An idle worker looks at the queues at least this often, rung or not.
WAKE_S = 1.0
DOORBELL_MAX = 64  # tokens kept at most: one wakes one idle worker; stale ones cost a look each

JOB_FUNCTIONS: dict[JobName, str] = {
    "diagnosis": "gencoach.workers.jobs.diagnosis_job",
    "repair": "gencoach.workers.jobs.repair_job",
    "rewrite": "gencoach.workers.jobs.rewrite_job",
}
JOB_QUEUES: dict[JobName, str] = {
    "diagnosis": QUEUE_DIAGNOSIS,
    "repair": QUEUE_REPAIR,
    "rewrite": QUEUE_DIAGNOSIS,
}
TAKE_SCRIPT: Final = resources.files("gencoach.workers").joinpath("lua/take_job.lua").read_text()
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")

log = get_logger("queues")


def job_id(job: AnyJob) -> str:
    """The RQ job id of a job (see `rq_job_id`)."""
    return rq_job_id(job.request_id, job.job, job.attempt)


def rq_job_id(request_id: str, job: JobName, attempt: int) -> str:
    """The RQ job id of a request's job: `{request_id}-{job}-{attempt}`, in RQ's characters.

    RQ 3 takes only letters, digits, `_` and `-` (`:` separates its execution ids), so
    other characters of the request id become `_`, with a digest of the original id
    appended to keep distinct ids distinct.
    """
    safe = _UNSAFE.sub("_", request_id)
    if safe != request_id:
        safe += "_" + hashlib.sha256(request_id.encode()).hexdigest()[:10]
    return f"{safe}-{job}-{attempt}"


def safe_name(name: str) -> str:
    """`name` in the characters RQ takes in worker and job names."""
    return _UNSAFE.sub("_", name)


def waiting(connection: redis.Redis, rq_id: str) -> bool:
    """Whether the job is still waiting for a worker (queued, deferred or scheduled).

    A job a worker has just taken counts as waiting until RQ marks it started, a few
    milliseconds later; if that worker dies in between, RQ's maintenance fails the job
    out of the intermediate list within minutes and the lease then lapses.
    """
    try:
        status = Job.fetch(rq_id, connection=connection).get_status()
    except NoSuchJobError:
        return False
    return status in (JobStatus.QUEUED, JobStatus.DEFERRED, JobStatus.SCHEDULED)


def enqueue(connection: redis.Redis, job: AnyJob, *, job_timeout_s: float) -> str:
    """Put a job on its queue (idempotent per request, job and attempt); return its RQ id.

    Synchronous, like RQ: call it from async code through `anyio.to_thread.run_sync`.
    """
    queue = Queue(JOB_QUEUES[job.job], connection=connection)
    rq_id = job_id(job)
    try:
        queue.enqueue(
            JOB_FUNCTIONS[job.job],
            job.model_dump_json(),
            job_id=rq_id,
            job_timeout=math.ceil(job_timeout_s) + TIMEOUT_MARGIN_S,
            result_ttl=RESULT_TTL_S,
            failure_ttl=FAILURE_TTL_S,
            description=f"{job.job} {job.request_id} attempt {job.attempt}",
            unique=True,
        )
    except DuplicateJobError:
        log.info("job.already_enqueued", job_id=rq_id, request_id=job.request_id)
        return rq_id
    ring(connection)
    return rq_id


def ring(connection: redis.Redis) -> None:
    """Wake one idle worker (a token on the doorbell list, which stays short)."""
    with connection.pipeline(transaction=False) as pipeline:
        pipeline.lpush(QUEUE_DOORBELL, b"1")
        pipeline.ltrim(QUEUE_DOORBELL, 0, DOORBELL_MAX - 1)
        pipeline.execute()


def take_keys(queues: Iterable[Queue]) -> list[str]:
    """The KEYS of the take script for `queues`: the queue lists, then their intermediates."""
    keys = [queue.key for queue in queues]
    return [*keys, *(IntermediateQueue.get_intermediate_queue_key(key) for key in keys)]


def taken(reply: Any, keys: Sequence[str]) -> tuple[str, str] | None:
    """The (queue key, job id) the take script answered, or None."""
    if not reply:
        return None
    index, rq_id = reply
    return keys[int(index) - 1], rq_id.decode() if isinstance(rq_id, bytes) else str(rq_id)


def restore_job(
    data: Mapping[Any, Any], rq_id: str, connection: redis.Redis, job_class: type[Job] = Job
) -> Job | None:
    """The job from its hash as `HGETALL` returned it; None when it no longer exists."""
    if not data:
        return None
    job = job_class(rq_id, connection=connection)
    job.restore(dict(data))
    return job


class PriorityQueue(Queue):
    """An RQ queue whose `dequeue_any` takes jobs atomically in the given queue order."""

    @classmethod
    def dequeue_any(
        cls,
        queues: Iterable[Queue],
        timeout: int | None,
        connection: redis.Redis,
        job_class: type[Job] | None = None,
        serializer: Any = None,
        death_penalty_class: Any = None,
    ) -> tuple[Job, Queue] | None:
        """The first job of the first non-empty queue, blocking up to `timeout` (None: not)."""
        queue_list = list(queues)
        keys = take_keys(queue_list)
        script = connection.register_script(TAKE_SCRIPT)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            popped = taken(script(keys=keys), keys)
            if popped is None:
                if deadline is None:
                    return None
                left = deadline - time.monotonic()
                if left <= 0:
                    raise DequeueTimeout(timeout, keys)
                connection.blpop([QUEUE_DOORBELL], timeout=min(left, WAKE_S))
                continue
            queue_key, rq_id = popped
            queue = next(q for q in queue_list if q.key == queue_key)
            job = restore_job(
                connection.hgetall(Job.key_for(rq_id)), rq_id, connection, job_class or Job
            )
            if job is None:
                connection.lrem(IntermediateQueue.get_intermediate_queue_key(queue_key), 1, rq_id)
                continue
            return job, queue
