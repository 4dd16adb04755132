"""An RQ worker that runs many jobs at once, as tasks on one long-lived event loop.

`AsyncWorker` takes up to `concurrency` jobs off its queues and awaits each as a task,
sharing `gencoach.workers.resources`; RQ's record of them is kept by
`gencoach.rq_adapter.ConcurrentWorker`. What operators see of it: docs/workers.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import inspect
import signal
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
import anyio.to_thread

from gencoach.constants import QUEUE_DOORBELL
from gencoach.rq_adapter import (
    TAKE_SCRIPT,
    WAKE_S,
    ConcurrentWorker,
    ExcInfo,
    Execution,
    Job,
    JobTimeoutException,
    Queue,
    take_args,
    take_keys,
    taken,
)
from gencoach.runtime.logs import get_logger
from gencoach.workers.context import current_context
from gencoach.workers.outage import REDIS_AWAY, RedisOutage, address_of
from gencoach.workers.resources import JobResources, shared_resources

log = get_logger("worker")


@dataclass(frozen=True)
class _Failure:
    """How a job failed, as RQ's failure handlers take it."""

    exc_info: ExcInfo


class WorkerStoppedError(Exception):
    """The worker stopped before the job finished (cold stop, or the warm stop's grace ran out)."""


class JobStoppedError(Exception):
    """RQ's stop-job command cancelled the job."""


@dataclass
class _Running:
    job: Job
    execution: Execution
    scope: anyio.CancelScope


@functools.cache
def _function(path: str) -> Any:
    """The function a job names, imported once (RQ's own lookup tries failing imports first)."""
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _failure(error: BaseException) -> _Failure:
    return _Failure((type(error), error, error.__traceback__))


class AsyncWorker(ConcurrentWorker):
    """Runs up to `concurrency` RQ jobs at once on one event loop.

    Coaching jobs wait on LLMs and agents, not on the CPU: forking a process per job
    (RQ's `Worker`) spent more time importing and building clients than the jobs spent
    working, and ran one job per process. RQ 3.0 has no concurrent worker (RQ issue #45
    asks for one; an async worker is an open pull request, #2445), so this one is built
    from RQ's own parts and keeps RQ's job life cycle true: an `Execution` per job, the
    started, finished and failed registries with RQ's TTLs and `Retry` handling,
    heartbeats for the worker and each job in flight, RQ's maintenance and stop commands.
    That bookkeeping is synchronous redis-py and runs in threads, off the loop. A job
    function's return value is not kept: gencoach's publish their results on the results
    stream and return nothing.

    A job's timeout is a cancel scope (`anyio.fail_after`), never SIGALRM. SIGTERM or
    SIGINT is a warm stop (take nothing more, let jobs finish within `shutdown_grace_s`,
    then cancel them); a second signal is a cold stop (cancel at once). A cancelled job
    is recorded as failed with the reason; its coaching lease lapses and the controller
    retries the request.
    """

    def __init__(
        self,
        queues: list[str],
        *,
        concurrency: int,
        shutdown_grace_s: float,
        **options: Any,
    ) -> None:
        super().__init__(queues, **options)
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.concurrency = concurrency
        self.shutdown_grace_s = shutdown_grace_s
        self.completed = 0
        self._outage = RedisOutage(address_of(self.connection))
        self._running: dict[str, _Running] = {}  # by RQ execution id
        self._in_flight = 0  # jobs taken and not yet recorded, whatever their stage
        self._draining = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._signals = 0
        # Made on the event loop, in `_work`: what a warm stop cancels (taking jobs) and
        # what a cold stop cancels (the jobs).
        self._taking: anyio.CancelScope
        self._jobs: anyio.CancelScope

    def work(self, burst: bool = False, logging_level: str | None = None, **_: Any) -> bool:  # type: ignore[override]
        """Serve the queues until stopped (or, in burst, until they and the worker are empty).

        Returns whether any job was run. Call it from the main thread (it handles SIGTERM
        and SIGINT) of a process where `gencoach.workers.context` is set.
        """
        self.bootstrap(logging_level or "INFO")
        try:
            anyio.run(self._work, burst, backend="asyncio")
        finally:
            try:
                self.teardown()  # type: ignore[no-untyped-call]
            except REDIS_AWAY as error:
                log.warning("worker.death_unrecorded", redis=self._outage.url, error=str(error))
        return self.completed > 0

    async def _work(self, burst: bool) -> None:
        self._loop = asyncio.get_running_loop()
        self._taking, self._jobs = anyio.CancelScope(), anyio.CancelScope()
        async with (
            shared_resources(current_context()) as resources,
            anyio.create_task_group() as service,
        ):
            service.start_soon(self._watch_signals)
            service.start_soon(self._keep_alive, resources)
            await self._serve(resources, burst)
            service.cancel_scope.cancel()

    async def _serve(self, resources: JobResources, burst: bool) -> None:
        self._drained = anyio.Event()
        slots = anyio.Semaphore(self.concurrency)
        with self._jobs:
            async with anyio.create_task_group() as jobs:
                with self._taking:
                    while True:
                        await slots.acquire()
                        wait_s = None if not burst else (WAKE_S if self._in_flight else 0.0)
                        try:
                            job_and_queue = await self._take(resources, wait_s)
                        except REDIS_AWAY as error:
                            slots.release()
                            await self._wait_for_redis(resources, error)
                            continue
                        if job_and_queue is None:
                            slots.release()
                            if burst and not self._in_flight:
                                break
                            continue
                        self._in_flight += 1
                        jobs.start_soon(self._execute, *job_and_queue, slots)
                self._draining = True
                if self._in_flight:
                    log.info("worker.draining", jobs=self._in_flight, grace_s=self.shutdown_grace_s)
                    jobs.start_soon(self._cancel_after_grace)

    async def _wait_for_redis(self, resources: JobResources, error: Exception) -> None:
        """Wait until Redis takes writes again (away, loading or full), then register with
        RQ again if it lost this worker."""
        if not await self._outage.wait_until_back(resources.redis, error):
            return  # another task's wait: it registers
        with contextlib.suppress(*REDIS_AWAY):  # gone again: the next call waits again
            if await anyio.to_thread.run_sync(self.register_again):
                log.info("worker.registered_again", name=self.name)

    async def _cancel_after_grace(self) -> None:
        with anyio.move_on_after(self.shutdown_grace_s):
            await self._drained.wait()
            return
        log.warning("worker.grace_over", cancelled=self._in_flight)
        self._jobs.cancel()

    async def _take(
        self, resources: JobResources, wait_s: float | None
    ) -> tuple[Job, Queue] | None:
        """The next job in queue order, waiting up to `wait_s` (None: until stopped)."""
        keys = take_keys(self.queues)
        queues = {queue.key: queue for queue in self.queues}
        script = resources.redis.register_script(TAKE_SCRIPT)
        deadline = None if wait_s is None else anyio.current_time() + wait_s
        while True:
            # A job the script moved must reach the started registry: no cancelling here.
            with anyio.CancelScope(shield=True):
                reply = await script(keys=keys, args=take_args())
            popped = taken(reply, keys, self.connection, self.job_class)
            if popped is not None:
                job, queue_key = popped
                return job, queues[queue_key]
            left = WAKE_S if deadline is None else deadline - anyio.current_time()
            if left <= 0:
                return None
            await resources.redis.blpop([QUEUE_DOORBELL], timeout=min(left, WAKE_S))

    async def _execute(self, job: Job, queue: Queue, slots: anyio.Semaphore) -> None:
        execution: Execution | None = None
        try:
            execution = await anyio.to_thread.run_sync(self.start_execution, job)
            outcome = await self._perform(job, execution)
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._finalize, job, queue, execution, outcome)
        except REDIS_AWAY as error:
            # The take loop reports the outage; this job's lease lapses and its request is
            # retried by the controller.
            log.warning("worker.job_unrecorded", job=job.id, error=str(error))
        except anyio.get_cancelled_exc_class():
            if execution is not None:
                stopped = WorkerStoppedError("the worker stopped before the job finished")
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(
                        self._finalize, job, queue, execution, _failure(stopped)
                    )
            raise
        finally:
            if execution is not None:
                self._running.pop(execution.id, None)
            slots.release()
            self.completed += 1
            self._in_flight -= 1
            if self._draining and not self._in_flight:
                self._drained.set()
            if not self._in_flight and execution is not None:
                with anyio.CancelScope(shield=True):
                    await self._show_idle()

    async def _show_idle(self) -> None:
        """Tell RQ this worker is idle; with Redis away that waits for the next job (the
        take loop reports the outage), rather than ending the worker."""
        try:
            await anyio.to_thread.run_sync(self.show_idle)
        except REDIS_AWAY as error:
            log.info("worker.idle_unrecorded", error=str(error))

    async def _perform(self, job: Job, execution: Execution) -> Any:
        """The job's return value, or the exc_info of how it failed."""
        timeout = job.timeout or self.queue_class.DEFAULT_TIMEOUT
        with anyio.CancelScope() as scope:
            self._running[execution.id] = _Running(job, execution, scope)
            try:
                with anyio.fail_after(None if timeout == -1 else timeout):
                    return await self._call(job)
            except TimeoutError:
                message = f"Task exceeded maximum timeout value ({timeout} seconds)"
                return _failure(JobTimeoutException(message))
            except Exception as error:
                return _failure(error)
        return _failure(JobStoppedError("stopped by RQ's stop-job command"))

    async def _call(self, job: Job) -> Any:
        function = _function(job.func_name)
        if inspect.iscoroutinefunction(function):
            return await function(*job.args, **job.kwargs)
        call = partial(function, *job.args, **job.kwargs)
        return await anyio.to_thread.run_sync(call, abandon_on_cancel=True)

    def _finalize(self, job: Job, queue: Queue, execution: Execution, outcome: Any) -> None:
        """Record the outcome with RQ's own handlers (in a thread: they block on Redis)."""
        if isinstance(outcome, _Failure):
            self.record_failure(job, queue, execution, outcome.exc_info)
        else:
            self.record_success(job, queue, execution)

    async def _keep_alive(self, resources: JobResources) -> None:
        """RQ heartbeats for the worker and each job in flight, and RQ's maintenance; a
        heartbeat Redis refuses (away, loading, at maxmemory) waits for Redis."""
        while True:
            await anyio.sleep(self.job_monitoring_interval)
            running = [(entry.job, entry.execution) for entry in self._running.values()]
            try:
                await anyio.to_thread.run_sync(self.beat, running)
            except REDIS_AWAY as error:
                await self._wait_for_redis(resources, error)

    async def _watch_signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                self._signals += 1
                name = signal.Signals(signum).name
                if self._signals == 1:
                    log.info("worker.stopping", mode="warm", signal=name, jobs=len(self._running))
                    with contextlib.suppress(*REDIS_AWAY):  # only RQ's record of the stop
                        await anyio.to_thread.run_sync(self.record_shutdown_request)
                    self._taking.cancel()
                else:
                    log.warning(
                        "worker.stopping", mode="cold", signal=name, jobs=len(self._running)
                    )
                    self._taking.cancel()
                    self._jobs.cancel()

    def cancel_execution(self, execution_id: str) -> None:
        """Cancel that job's scope on the loop (RQ's stop commands call this from a thread)."""
        entry = self._running.get(execution_id)
        if entry is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(entry.scope.cancel)
