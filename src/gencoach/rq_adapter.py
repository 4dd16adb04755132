"""The one module that speaks to RQ: enqueuing jobs, taking them in priority order, reading
where they are, and the bookkeeping of the workers that run them.

Nothing else imports `rq`; this one uses RQ's public API only, at the version pinned in
`pyproject.toml` and `docker/constraints.txt`. `PriorityQueue` takes jobs atomically;
`ForkWorker` and `ConcurrentWorker` keep RQ's records. Async code calls in via `anyio.to_thread`.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
import traceback
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from typing import Any, Final, Literal

import redis
from redis.client import Pipeline
from rq import Queue, Worker
from rq.exceptions import DequeueTimeout, DuplicateJobError, InvalidJobOperation
from rq.executions import Execution
from rq.job import Job, JobStatus
from rq.timeouts import JobTimeoutException, TimerDeathPenalty
from rq.utils import now, utcformat
from rq.worker import BaseWorker, WorkerStatus

from gencoach.constants import QUEUE_DIAGNOSIS, QUEUE_DOORBELL, QUEUE_REPAIR
from gencoach.followups import FOLLOW_UP_WAIT_S
from gencoach.protocol.jobs import AnyJob, JobName
from gencoach.runtime.logs import get_logger

# RQ's own types the workers name, re-exported so that they need not import rq (the
# rest of this module's names are gencoach's).
__all__ = [
    "Execution",
    "Job",
    "JobTimeoutException",
    "Queue",
]

RESULT_TTL_S = 3_600  # a finished job id is kept this long: enqueuing it again is a no-op
FAILURE_TTL_S = 86_400
# RQ's own time limit comes this long after the job's, which reports an error first.
TIMEOUT_MARGIN_S = 30
# An idle worker looks at the queues at least this often, rung or not.
WAKE_S = 1.0
DOORBELL_MAX = 64  # tokens kept at most: one wakes one idle worker; stale ones cost a look each

JOB_FUNCTIONS: dict[JobName, str] = {
    "diagnosis": "gencoach.workers.job_functions.diagnosis_job",
    "repair": "gencoach.workers.job_functions.repair_job",
    "rewrite": "gencoach.workers.job_functions.rewrite_job",
}
JOB_QUEUES: dict[JobName, str] = {
    "diagnosis": QUEUE_DIAGNOSIS,
    "repair": QUEUE_REPAIR,
    "rewrite": QUEUE_DIAGNOSIS,
}
TAKE_SCRIPT: Final = resources.files("gencoach").joinpath("lua/take_job.lua").read_text()
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
    """Whether the job is still waiting for a worker (see `job_state`)."""
    return job_state(connection, rq_id) == "waiting"


def enqueue(connection: redis.Redis, job: AnyJob, *, job_timeout_s: float) -> str:
    """Put a job on its queue (idempotent per request, job and attempt); return its RQ id.

    Synchronous, like RQ: call it from async code through `anyio.to_thread.run_sync`.
    """
    queue = Queue(JOB_QUEUES[job.job], connection=connection)
    rq_id = job_id(job)
    description = f"{job.job} {job.request_id} attempt {job.attempt} of {job.max_attempts}"
    # RQ saves and pushes a unique job in one script call, at once; the transaction it
    # sends besides (the queue's name in `rq:queues`) takes the doorbell along, in one
    # round trip after the job is on its queue instead of two.
    with connection.pipeline(transaction=False) as pipeline:
        try:
            queue.enqueue(
                JOB_FUNCTIONS[job.job],
                job.model_dump_json(),
                job_id=rq_id,
                job_timeout=rq_timeout_s(job.job, job_timeout_s),
                result_ttl=RESULT_TTL_S,
                failure_ttl=FAILURE_TTL_S,
                description=description,
                unique=True,
                pipeline=pipeline,
            )
        except DuplicateJobError:
            log.info("job.already_enqueued", job_id=rq_id, request_id=job.request_id)
            return rq_id
        ring(pipeline)
        pipeline.execute()
    return rq_id


def rq_timeout_s(job: JobName, job_timeout_s: float) -> int:
    """RQ's time limit for a job: after the job's own, which reports an error first; a
    diagnosis's covers the repair its worker may do next (`gencoach.followups`)."""
    own = math.ceil(job_timeout_s) + TIMEOUT_MARGIN_S
    if job == "diagnosis":
        return own + math.ceil(FOLLOW_UP_WAIT_S) + math.ceil(job_timeout_s)
    return own


def ring(client: redis.Redis | Pipeline) -> None:
    """Wake one idle worker (a token on the doorbell list, which stays short); given a
    pipeline, the caller executes it."""
    if isinstance(client, Pipeline):
        client.lpush(QUEUE_DOORBELL, b"1")
        client.ltrim(QUEUE_DOORBELL, 0, DOORBELL_MAX - 1)
        return
    with client.pipeline(transaction=False) as pipeline:
        ring(pipeline)
        pipeline.execute()


def take_keys(queues: Iterable[Queue]) -> list[str]:
    """The KEYS of the take script for `queues`: the queue lists, then their intermediates."""
    listed = list(queues)
    return [*(queue.key for queue in listed), *(queue.intermediate_queue_key for queue in listed)]


def take_args() -> list[str]:
    """The ARGV of the take script: the prefix of RQ's job hashes."""
    return [Job.redis_job_namespace_prefix]


def taken(
    reply: Any, keys: Sequence[str], connection: redis.Redis, job_class: type[Job] = Job
) -> tuple[Job, str] | None:
    """The job the take script answered, restored from the hash it read, with the key of
    the queue it came from; None when every queue was empty."""
    if not reply:
        return None
    index, raw_id, fields = reply
    rq_id = raw_id.decode() if isinstance(raw_id, bytes) else str(raw_id)
    job = job_class(rq_id, connection=connection)
    job.restore(dict(zip(fields[::2], fields[1::2], strict=True)))
    return job, keys[int(index) - 1]


class PriorityQueue(Queue):
    """An RQ queue whose `dequeue_any` takes jobs atomically in the given queue order.

    Every worker serves every gencoach queue, first to last (repair before diagnosis, so
    that corrections already under way finish first). RQ's own multi-queue dequeue is a
    plain BLPOP (RQ issue #1716): a worker that dies between the pop and the started
    registry loses the job without a trace. Here one Lua script (`lua/take_job.lua`)
    moves the job from its queue into RQ's intermediate list in a single step, as RQ does
    for one queue, so RQ's maintenance recovers it. Idle workers block on the doorbell
    list that `enqueue` rings, for at most `WAKE_S`: jobs RQ itself puts back
    (`rq requeue`) ring no bell.
    """

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
            popped = taken(script(keys=keys, args=take_args()), keys, connection, job_class or Job)
            if popped is not None:
                job, queue_key = popped
                return job, next(q for q in queue_list if q.key == queue_key)
            if deadline is None:
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                raise DequeueTimeout(timeout, keys)
            connection.blpop([QUEUE_DOORBELL], timeout=min(left, WAKE_S))


class ForkWorker(Worker):
    """RQ's forking `Worker` over every queue with `PriorityQueue`'s atomic take.

    For backends that run code which must not share a process with other jobs (a python
    backend running user code): each job runs in a forked work-horse, which a crash or a
    runaway job cannot take the worker down with. It costs a fork, an event loop and fresh
    clients per job, and runs one job per process; `AsyncWorker` is the default.
    """

    queue_class = PriorityQueue

    def prepare_job_execution(self, job: Job, remove_from_intermediate_queue: bool = False) -> None:
        """RQ's bookkeeping, always clearing the intermediate list the take put the job in."""
        super().prepare_job_execution(job, remove_from_intermediate_queue=True)


ExcInfo = tuple[type[BaseException], BaseException, Any]


class ConcurrentWorker(BaseWorker):
    """RQ's worker bookkeeping for a worker that runs several jobs at once.

    `gencoach.workers.async_worker.AsyncWorker` runs the jobs; this class keeps RQ's
    record of them true through RQ's public worker methods: each job gets an RQ
    `Execution` and sits in the started registry while it runs, then in the finished or
    failed registry with RQ's result, TTLs and `Retry` handling; heartbeats and RQ's
    maintenance; RQ's stop commands. Every method blocks on Redis: call it in a thread.
    """

    queue_class = PriorityQueue
    # RQ's success and failure callbacks, if a job has any, run in a thread: no SIGALRM.
    death_penalty_class = TimerDeathPenalty
    log_result_lifespan = False

    def start_execution(self, job: Job) -> Execution:
        """RQ's bookkeeping before a job runs: its execution, then its started status."""
        execution = self.prepare_execution(job)
        self.prepare_job_execution(job, remove_from_intermediate_queue=True)
        return execution

    def record_success(self, job: Job, queue: Queue, execution: Execution) -> None:
        """The job returned: finished, with RQ's result TTL."""
        self.handle_execution_ended(job, queue, job.success_callback_timeout)
        self.handle_job_success(job, queue, queue.started_job_registry, execution)

    def record_failure(
        self, job: Job, queue: Queue, execution: Execution, exc_info: ExcInfo
    ) -> None:
        """The job raised, timed out or was cancelled: retried as its `Retry` says, else
        failed (or stopped, after RQ's stop command), with the traceback as RQ's result."""
        self.handle_execution_ended(job, queue, job.failure_callback_timeout)
        self.handle_exception(job, *exc_info)
        self.handle_job_failure(
            job,
            queue,
            queue.started_job_registry,
            exc_string="".join(traceback.format_exception(*exc_info)),
            execution=execution,
        )

    def beat(self, running: Sequence[tuple[Job, Execution]]) -> None:
        """RQ heartbeats for the worker and every job in flight, and RQ's maintenance."""
        for job, execution in running:
            self.maintain_heartbeats(job, execution)
        if not running:
            self.heartbeat()
        if self.should_run_maintenance_tasks:
            self.run_maintenance_tasks()  # type: ignore[no-untyped-call]

    def show_idle(self) -> None:
        """Tell RQ the worker has no job in flight."""
        self.set_state(WorkerStatus.IDLE)

    def register_again(self) -> bool:
        """After an outage: register this worker again if Redis lost it (a restart, or
        its hash expired while heartbeats were refused).

        A heartbeat sent since may have made a partial worker hash: it goes first, or RQ
        would take it for another live worker of the same name. Returns whether it did.
        """
        # Its hash may also have expired while Redis refused heartbeats (at maxmemory).
        if self.connection.sismember(self.redis_workers_keys, self.key) and (
            self.connection.hexists(self.key, "birth")
        ):
            return False
        self.connection.delete(self.key)
        self.register_birth()  # type: ignore[no-untyped-call]
        return True

    def record_shutdown_request(self) -> None:
        """Note a warm stop in the worker's RQ hash (`rq info` shows it)."""
        self.connection.hset(self.key, "shutdown_requested_date", utcformat(now()))

    def stop_job(self, rq_id: str) -> bool:
        """RQ's stop-job command: stop every execution of that job; whether there was one."""
        executions = [e for e in self.executions.values() if e.job_id == rq_id]
        for execution in executions:
            self.request_stop_execution(execution.id)
        return bool(executions)

    def request_stop_execution(self, execution_id: str) -> None:
        """RQ's stop-execution command: RQ marks the job stopped, then it is cancelled."""
        if execution_id in self.executions:
            super().request_stop_execution(execution_id)
            self.cancel_execution(execution_id)
        else:
            self.log.warning("Not running execution %s, command ignored.", execution_id)

    def cancel_execution(self, execution_id: str) -> None:
        """Cancel that execution's job (called from RQ's pub/sub thread); subclasses run jobs."""
        raise NotImplementedError

    def handle_payload(self, message: Any) -> None:
        """RQ's commands (from its pub/sub thread); stop-job stops that job, whichever it is."""
        payload = json.loads(message["data"])
        if payload.get("command") != "stop-job":
            super().handle_payload(message)  # type: ignore[no-untyped-call]
            return
        rq_id = payload.get("job_id")
        if not isinstance(rq_id, str) or not self.stop_job(rq_id):
            self.log.warning("Not working on job %s, command ignored.", rq_id)


JobState = Literal["waiting", "started", "ended"]
_WAITING = frozenset({JobStatus.QUEUED, JobStatus.DEFERRED, JobStatus.SCHEDULED})


def job_state(connection: redis.Redis, rq_id: str) -> JobState:
    """`waiting` on its queue, `started` by a worker, or `ended` (finished, failed, unknown).

    A job a worker has just taken counts as waiting until RQ marks it started, a few
    milliseconds later; if that worker dies in between, RQ's maintenance fails the job
    out of the intermediate list within minutes and the lease then lapses.
    """
    try:  # the status field alone (one HGET), not the job's whole hash and payload
        status = Job(rq_id, connection=connection).get_status()
    except InvalidJobOperation:  # no such job (or one without a status)
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


def backlog(connection: redis.Redis, queue_name: str) -> Backlog:
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


def queue_depths(connection: redis.Redis, names: Sequence[str]) -> list[dict[str, object]]:
    """One row per queue: queued, started and failed jobs, and the workers serving it."""
    rows: list[dict[str, object]] = []
    for name in names:
        queue = Queue(name, connection=connection)
        rows.append(
            {
                "queue": name,
                "queued": queue.count,
                "started": queue.started_job_registry.count,
                "failed": queue.failed_job_registry.count,
                "workers": Worker.count(connection=connection, queue=queue),
            }
        )
    return rows
