"""`gencoach worker`: worker processes that each serve every queue, and their supervision.

`run_workers` runs the pool (`_Pool`): spawned children, each one RQ worker over all the
queues in priority order, an `AsyncWorker` (`workers.mode: async`, the default) or a
`ForkWorker` (`mode: fork`). How operators run and stop it: docs/workers.md.
"""

from __future__ import annotations

import importlib
import logging
import multiprocessing
import os
import re
import signal
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from types import FrameType
from typing import Any, Literal

import redis

from gencoach.config import scrubbing
from gencoach.config.settings import Settings
from gencoach.rq_adapter import RESULT_TTL_S, ConcurrentWorker, ForkWorker, ring, safe_name
from gencoach.runtime.logs import configure_logging, get_logger
from gencoach.runtime.retrying import describe, no_client_retries
from gencoach.workers.async_worker import AsyncWorker
from gencoach.workers.context import WorkerContext, set_context
from gencoach.workers.outage import REDIS_AWAY, wait_writable
from gencoach.workers.tls import shared_ssl_context

__all__ = ["MAX_RESTARTS", "run_workers"]

# RQ tuned for a long-lived service: a short worker TTL, frequent maintenance and no RQ
# retries (the controller decides what to retry). A job's RQ heartbeat (nine commands,
# for RQ's view alone: the controller follows the job's lease) is sent every 15 s, so
# that most jobs, which wait seconds on an LLM, cost none or one.
WORKER_TTL_S = 30
JOB_MONITORING_INTERVAL_S = 15
MAINTENANCE_INTERVAL_S = 15
MAX_RESTARTS = 5
RESTART_WINDOW_S = 60.0
COLD_RESEND_S = 1.1  # RQ ignores a second signal that comes within 1 s of the first
COLD_DEADLINE_S = 10.0  # after a cold shutdown request, children still alive are killed
POLL_S = 0.2
PARENT_CHECK_S = 0.2  # how soon a worker whose pool died stops taking jobs
# A child's exit status saying Redis was away (EX_TEMPFAIL): start it again later.
EXIT_REDIS_AWAY = 75
REDIS_RESTART_S = 5.0

Mode = Literal["async", "fork"]

# Modules the jobs need, imported once per worker process (see `_child_main`).
PRELOADED = (
    "gencoach.workers.job_functions",
    "gencoach.workers.backends.openai",
    "gencoach.workers.backends.python",
    "gencoach.agent_client",
    "anyio._backends._asyncio",
    "httpcore",
)

log = get_logger("pool")


@dataclass(frozen=True)
class WorkerOptions:
    """What every worker process of a pool runs: queues in order, mode, jobs at once."""

    queues: tuple[str, ...]
    mode: Mode = "async"
    concurrency: int = 32
    shutdown_grace_s: float = 30.0
    burst: bool = False


# RQ colours parts of its messages for a terminal; our renderers do their own.
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


class RQLogHandler(logging.Handler):
    """Re-emit RQ's standard-library log records as structlog events (one log format)."""

    def emit(self, record: logging.LogRecord) -> None:
        """Log the record's message, without RQ's terminal colours, under `rq.log`."""
        message = _ANSI_ESCAPE.sub("", record.getMessage())
        get_logger("rq").log(record.levelno, "rq.log", logger=record.name, msg=message)


def _watch_parent(parent_pid: int) -> None:
    """Ask this worker for a warm shutdown if the pool process goes away."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_CHECK_S)
        os.kill(os.getpid(), signal.SIGTERM)
        # An orphan must not linger: if the warm stop has not ended in time, leave hard
        # (the job's lease lapses and the controller retries it).
        time.sleep(WORKER_TTL_S)
        os._exit(1)

    threading.Thread(target=watch, name="pool-watch", daemon=True).start()


def _make_worker(
    options: WorkerOptions, name: str, connection: redis.Redis
) -> ConcurrentWorker | ForkWorker:
    common: dict[str, Any] = {
        "name": name,
        "connection": connection,
        "worker_ttl": WORKER_TTL_S,
        "job_monitoring_interval": JOB_MONITORING_INTERVAL_S,
        "maintenance_interval": MAINTENANCE_INTERVAL_S,
        "default_result_ttl": RESULT_TTL_S,
    }
    if options.mode == "fork":
        return ForkWorker(list(options.queues), **common)
    return AsyncWorker(
        list(options.queues),
        concurrency=options.concurrency,
        shutdown_grace_s=options.shutdown_grace_s,
        **common,
    )


def _child_main(
    settings: Settings, redis_url: str, options: WorkerOptions, name: str, pool_pid: int
) -> None:
    """Run one RQ worker over the queues until it is told to stop (or, in burst, runs dry)."""
    # A pool killed while it started this process must not leave it serving on its own
    # (with the settings of a pool that is gone): watch the pool, not whoever adopted us.
    if os.getppid() != pool_pid:
        os._exit(1)
    _watch_parent(pool_pid)
    # Signals reach this process from the pool only, once each (not a terminal's Ctrl-C too).
    os.setpgrp()
    scrubbing.install(scrubbing.secret_values(settings))
    configure_logging(settings.log.level, settings.log.format)
    rq_logger = logging.getLogger("rq")
    rq_logger.addHandler(RQLogHandler())
    rq_logger.setLevel(settings.log.level.upper())
    set_context(WorkerContext(settings, redis_url))
    # Imported once here, not by every job (a forked work-horse inherits them).
    for module in PRELOADED:
        importlib.import_module(module)
    shared_ssl_context()
    connection = redis.Redis.from_url(redis_url)
    try:
        wait_writable(connection)
        worker = _make_worker(options, name, connection)
        worker.work(burst=options.burst, logging_level=settings.log.level.upper())
    except REDIS_AWAY as error:
        log.warning("worker.redis_lost", error=describe(error), exitcode=EXIT_REDIS_AWAY)
        sys.exit(EXIT_REDIS_AWAY)


def redis_takes_writes(redis_url: str) -> bool:
    """Whether Redis answers and takes a write now (a token on the workers' doorbell)."""
    client = redis.Redis.from_url(
        redis_url, socket_timeout=5, socket_connect_timeout=5, retry=no_client_retries()
    )
    try:
        ring(client)
    except REDIS_AWAY:
        return False
    finally:
        client.close()
    return True


@dataclass
class _Child:
    index: int
    process: BaseProcess
    restarts: deque[float] = field(default_factory=deque)


class _Pool:
    """The parent: starts, watches, restarts and stops the worker processes.

    Each child is spawned, never forked from a threaded parent. The pool forwards SIGTERM
    and SIGINT to its children: the first signal asks for a warm shutdown (jobs in flight
    finish, within `workers.shutdown_grace_s` for the async worker), the second for a
    cold one (jobs are cancelled or their work-horse killed). A child that dies
    unexpectedly is restarted, at most `MAX_RESTARTS` times per `RESTART_WINDOW_S`; past
    that the pool stops and exits 1.

    Redis being away, loading or refusing writes is never a reason to stop: a child waits
    for Redis to take a write before RQ registers it (and a running async worker waits
    out an outage); a child that stops on such an error anyway exits `EXIT_REDIS_AWAY`
    and is started again after `REDIS_RESTART_S` without counting as a death; and a pool
    about to give up on a child first checks that Redis takes a write, and waits instead
    while it does not.
    """

    def __init__(self, settings: Settings, redis_url: str, options: WorkerOptions):
        self.settings, self.redis_url, self.options = settings, redis_url, options
        self.burst = options.burst
        self.spawn = multiprocessing.get_context("spawn")
        self.children: list[_Child] = []
        self.signals: list[int] = []
        self.stopping = False
        self.cold_since: float | None = None
        self.last_resend = 0.0
        self.failed = False
        # Children to start again once Redis may be back: (when, index, restarts).
        self.waiting: list[tuple[float, int, deque[float]]] = []

    def start(self, index: int, restarts: deque[float] | None = None) -> _Child:
        name = f"gencoach-{socket.gethostname()}-{os.getpid()}-{index}-{time.monotonic_ns()}"
        args = (self.settings, self.redis_url, self.options, safe_name(name), os.getpid())
        process = self.spawn.Process(target=_child_main, args=args, name=f"gencoach-worker-{index}")
        process.start()
        log.info(
            "worker.started",
            index=index,
            queues=list(self.options.queues),
            mode=self.options.mode,
            concurrency=self.options.concurrency if self.options.mode == "async" else 1,
            pid=process.pid,
        )
        return _Child(index, process, restarts or deque())

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
        if self.stopping:
            self.waiting.clear()
        for due in [entry for entry in self.waiting if entry[0] <= now]:
            self.waiting.remove(due)
            self.children.append(self.start(due[1], due[2]))

    def wait_for_redis(self, child: _Child, code: int | None) -> None:
        log.warning(
            "worker.waiting_for_redis",
            index=child.index,
            exitcode=code,
            restart_in_s=REDIS_RESTART_S,
            message="Redis is away, loading or refusing writes; the worker starts again "
            "once it takes writes",
        )
        self.waiting.append((time.monotonic() + REDIS_RESTART_S, child.index, child.restarts))

    def reap(self, child: _Child) -> None:
        self.children.remove(child)
        code = child.process.exitcode
        if self.stopping or (self.burst and code == 0):
            log.info("worker.stopped", index=child.index, exitcode=code)
            return
        if code == EXIT_REDIS_AWAY:
            self.wait_for_redis(child, code)
            return
        now = time.monotonic()
        while child.restarts and now - child.restarts[0] > RESTART_WINDOW_S:
            child.restarts.popleft()
        if len(child.restarts) >= MAX_RESTARTS and not redis_takes_writes(self.redis_url):
            # Deaths while Redis refuses writes say nothing about the worker.
            child.restarts.clear()
            self.wait_for_redis(child, code)
            return
        if len(child.restarts) >= MAX_RESTARTS:
            log.error("pool.gave_up", index=child.index, exitcode=code, restarts=MAX_RESTARTS)
            self.failed = True
            self.stop(f"worker {child.index} died {MAX_RESTARTS + 1} times in {RESTART_WINDOW_S} s")
            return
        child.restarts.append(now)
        log.warning("worker.restarted", index=child.index, exitcode=code)
        self.children.append(self.start(child.index, child.restarts))

    def run(self, processes: int) -> int:
        self.children = [self.start(index) for index in range(processes)]
        while self.children or self.waiting:
            self.step()
            sentinels = [child.process.sentinel for child in self.children]
            if sentinels:
                wait(sentinels, timeout=POLL_S)
            else:
                time.sleep(POLL_S)
        log.info("pool.stopped", failed=self.failed)
        return 1 if self.failed else 0


def run_workers(
    settings: Settings,
    redis_url: str,
    *,
    processes: int,
    queues: Sequence[str],
    burst: bool = False,
    mode: Mode | None = None,
    concurrency: int | None = None,
) -> int:
    """Run `processes` RQ workers, each over all `queues` in that order; the exit status.

    `mode` and `concurrency` default to the `workers` settings. Returns 0 after a clean
    stop (a signal, or every burst worker out of jobs), 1 when a worker kept dying or had
    to be killed. Installs SIGTERM and SIGINT handlers for the duration; call it from the
    main thread.
    """
    if processes < 1:
        raise ValueError(f"processes must be at least 1, got {processes}")
    if not queues:
        raise ValueError("give at least one queue")
    if concurrency is not None and concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    options = WorkerOptions(
        queues=tuple(queues),
        mode=mode or settings.workers.mode,
        concurrency=concurrency or settings.workers.concurrency,
        shutdown_grace_s=settings.workers.shutdown_grace_s,
        burst=burst,
    )
    pool = _Pool(settings, redis_url, options)
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
