"""`gencoach worker`: RQ worker processes, one queue each, and how jobs are put on the queues.

Each child process is spawned (never forked from a threaded parent) and runs one RQ
`Worker` on one queue, because single-queue workers dequeue atomically and multi-queue
ones do not (RQ issue #1716). RQ is tuned per DESIGN.md's pitfalls: a 30 s worker TTL
(so an idle worker wakes every 15 s), a 5 s job-monitoring interval, frequent
maintenance, and no RQ retries (the controller decides what to retry, by attempt).

The pool forwards SIGTERM and SIGINT to its children: the first signal asks for a
warm shutdown (each finishes its current job), the second for a cold one (RQ kills the
work-horse). A child that dies unexpectedly is restarted, at most `MAX_RESTARTS` times
per `RESTART_WINDOW_S`; past that the pool stops and exits 1.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import math
import multiprocessing
import os
import re
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from types import FrameType

import redis
from rq import Queue, Worker
from rq.exceptions import DuplicateJobError, NoSuchJobError
from rq.job import Job, JobStatus

from gencoach.config import scrubbing
from gencoach.config.settings import Settings
from gencoach.constants import QUEUE_DIAGNOSIS, QUEUE_REPAIR
from gencoach.logs import configure_logging, get_logger
from gencoach.protocol.jobs import AnyJob, JobName
from gencoach.workers.context import WorkerContext, set_context
from gencoach.workers.tls import shared_ssl_context

WORKER_TTL_S = 30
JOB_MONITORING_INTERVAL_S = 5
MAINTENANCE_INTERVAL_S = 15
RESULT_TTL_S = 3_600  # a finished job id is kept this long: enqueuing it again is a no-op
FAILURE_TTL_S = 86_400
# RQ's own time limit comes this long after the job's, which reports an error first.
TIMEOUT_MARGIN_S = 30
MAX_RESTARTS = 5
RESTART_WINDOW_S = 60.0
COLD_RESEND_S = 1.1  # RQ ignores a second signal that comes within 1 s of the first
COLD_DEADLINE_S = 10.0  # after a cold shutdown request, children still alive are killed
POLL_S = 0.2

JOB_FUNCTIONS: dict[JobName, str] = {
    "diagnosis": "gencoach.workers.jobs.run_diagnosis",
    "repair": "gencoach.workers.jobs.run_repair",
    "rewrite": "gencoach.workers.jobs.run_rewrite",
}
JOB_QUEUES: dict[JobName, str] = {
    "diagnosis": QUEUE_DIAGNOSIS,
    "repair": QUEUE_REPAIR,
    "rewrite": QUEUE_DIAGNOSIS,
}
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")

# Modules the jobs need, imported once per worker process (see `_child_main`).
PRELOADED = (
    "gencoach.workers.backends.openai",
    "gencoach.workers.backends.python",
    "gencoach.agent_client",
)

log = get_logger("pool")


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


def waiting(connection: redis.Redis, rq_id: str) -> bool:
    """Whether the job is still waiting on its queue (no worker has taken it yet)."""
    try:
        return Job.fetch(rq_id, connection=connection).get_status() in (
            JobStatus.QUEUED,
            JobStatus.DEFERRED,
            JobStatus.SCHEDULED,
        )
    except NoSuchJobError:
        return False


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


class _RQLogHandler(logging.Handler):
    """Re-emit RQ's standard-library log records as structlog events (one log format)."""

    def emit(self, record: logging.LogRecord) -> None:
        get_logger("rq").log(record.levelno, "rq.log", logger=record.name, msg=record.getMessage())


def _watch_parent(parent_pid: int) -> None:
    """Ask this worker for a warm shutdown if the pool process goes away."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)
        # An orphan must not linger: if the warm stop has not ended in time, leave hard
        # (the job's lease lapses and the controller retries it).
        time.sleep(WORKER_TTL_S)
        os._exit(1)

    threading.Thread(target=watch, name="pool-watch", daemon=True).start()


def _child_main(settings: Settings, redis_url: str, queue: str, burst: bool, name: str) -> None:
    """Run one RQ worker on one queue until it is told to stop (or, in burst, runs dry)."""
    # Signals reach this process from the pool only, once each (not a terminal's Ctrl-C too).
    os.setpgrp()
    scrubbing.install(scrubbing.secret_values(settings))
    configure_logging(settings.log.level, settings.log.format)
    rq_logger = logging.getLogger("rq")
    rq_logger.addHandler(_RQLogHandler())
    rq_logger.setLevel(settings.log.level.upper())
    set_context(WorkerContext(settings, redis_url))
    # RQ forks a work-horse per job: what is imported here is inherited, not imported again
    # by every job (that import alone took ~0.4 s a job).
    for module in {path.rpartition(".")[0] for path in JOB_FUNCTIONS.values()} | set(PRELOADED):
        importlib.import_module(module)
    shared_ssl_context()
    _watch_parent(os.getppid())
    connection = redis.Redis.from_url(redis_url)
    worker = Worker(
        [queue],
        name=name,
        connection=connection,
        worker_ttl=WORKER_TTL_S,
        job_monitoring_interval=JOB_MONITORING_INTERVAL_S,
        maintenance_interval=MAINTENANCE_INTERVAL_S,
        default_result_ttl=RESULT_TTL_S,
    )
    worker.work(burst=burst, logging_level=settings.log.level.upper())


@dataclass
class _Child:
    index: int
    queue: str
    process: BaseProcess
    restarts: deque[float] = field(default_factory=deque)


class _Pool:
    """The parent: starts, watches, restarts and stops the worker processes."""

    def __init__(self, settings: Settings, redis_url: str, queues: Sequence[str], burst: bool):
        self.settings, self.redis_url, self.queues, self.burst = settings, redis_url, queues, burst
        self.spawn = multiprocessing.get_context("spawn")
        self.children: list[_Child] = []
        self.signals: list[int] = []
        self.stopping = False
        self.cold_since: float | None = None
        self.last_resend = 0.0
        self.failed = False

    def start(self, index: int, restarts: deque[float] | None = None) -> _Child:
        queue = self.queues[index % len(self.queues)]
        name = f"gencoach-{socket.gethostname()}-{os.getpid()}-{index}-{time.monotonic_ns()}"
        args = (self.settings, self.redis_url, queue, self.burst, _UNSAFE.sub("_", name))
        process = self.spawn.Process(target=_child_main, args=args, name=f"gencoach-worker-{index}")
        process.start()
        log.info("worker.started", index=index, queue=queue, pid=process.pid)
        return _Child(index, queue, process, restarts or deque())

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.signals.append(signum)

    def signal_children(self, signum: int) -> None:
        for child in self.children:
            if child.process.pid is not None and child.process.exitcode is None:
                os.kill(child.process.pid, signum)

    def stop(self, reason: str) -> None:
        if not self.stopping:
            self.stopping = True
            log.info("pool.stopping", mode="warm", reason=reason)
            self.signal_children(signal.SIGTERM)

    def step(self) -> None:
        if self.signals and not self.stopping:
            self.stop(signal.Signals(self.signals[0]).name)
        if len(self.signals) > 1 and self.cold_since is None:
            self.cold_since = time.monotonic()
            log.warning("pool.stopping", mode="cold", reason=signal.Signals(self.signals[1]).name)
        now = time.monotonic()
        if self.cold_since is not None and now - self.last_resend >= COLD_RESEND_S:
            self.last_resend = now
            self.signal_children(signal.SIGTERM)
            if now - self.cold_since > COLD_DEADLINE_S:
                alive = [c.process.pid for c in self.children if c.process.exitcode is None]
                log.error("pool.killed", pids=alive, waited_s=COLD_DEADLINE_S)
                self.signal_children(signal.SIGKILL)
                self.failed = True
        for child in list(self.children):
            if child.process.exitcode is not None:
                self.reap(child)

    def reap(self, child: _Child) -> None:
        self.children.remove(child)
        code = child.process.exitcode
        if self.stopping or (self.burst and code == 0):
            log.info("worker.stopped", index=child.index, queue=child.queue, exitcode=code)
            return
        now = time.monotonic()
        while child.restarts and now - child.restarts[0] > RESTART_WINDOW_S:
            child.restarts.popleft()
        if len(child.restarts) >= MAX_RESTARTS:
            log.error("pool.gave_up", index=child.index, exitcode=code, restarts=MAX_RESTARTS)
            self.failed = True
            self.stop(f"worker {child.index} died {MAX_RESTARTS + 1} times in {RESTART_WINDOW_S} s")
            return
        child.restarts.append(now)
        log.warning("worker.restarted", index=child.index, queue=child.queue, exitcode=code)
        self.children.append(self.start(child.index, child.restarts))

    def run(self, processes: int) -> int:
        self.children = [self.start(index) for index in range(processes)]
        while self.children:
            self.step()
            sentinels = [child.process.sentinel for child in self.children]
            if sentinels:
                wait(sentinels, timeout=POLL_S)
        log.info("pool.stopped", failed=self.failed)
        return 1 if self.failed else 0


def run_workers(
    settings: Settings,
    redis_url: str,
    *,
    processes: int,
    queues: Sequence[str],
    burst: bool = False,
) -> int:
    """Run `processes` RQ workers over `queues` (round-robin, one queue each); the exit status.

    Returns 0 after a clean stop (a signal, or every burst worker out of jobs), 1 when a
    worker kept dying or had to be killed. Installs SIGTERM and SIGINT handlers for the
    duration; call it from the main thread.
    """
    if processes < 1:
        raise ValueError(f"processes must be at least 1, got {processes}")
    if not queues:
        raise ValueError("give at least one queue")
    pool = _Pool(settings, redis_url, list(queues), burst)
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    for signum in previous:
        signal.signal(signum, pool.on_signal)
    try:
        return pool.run(processes)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for child in pool.children:  # only after an error in the pool itself
            child.process.kill()
            child.process.join(5)
