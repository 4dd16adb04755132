"""The save loop: finished runs are written one at a time, each retried until it succeeds.

A failed save (Redis dropped the connection, the disk was full) is recorded on the
run, so `GET /v1/runs/{id}` shows it, and tried again as `SAVE_RETRY` says
(docs/operations.md, "Retries"). A save not written when the controller stops is queued by the next
controller's reconciler, which queues every finished run not yet saved.
"""

from __future__ import annotations

import contextlib
from typing import Final

import anyio
from anyio.abc import TaskGroup, TaskStatus

from gencoach.runtime.logs import get_logger
from gencoach.runtime.retrying import Attempt, Retrying, RetryPolicy
from gencoach.service.isolation import REDIS_UNAVAILABLE
from gencoach.service.saving.persist import Persister
from gencoach.service.store.graphstore import GraphStore

log = get_logger("saves")

# A failed save is tried again until it is written.
SAVE_RETRY: Final = RetryPolicy(timeout_s=None, wait_initial_s=1.0, wait_max_s=60.0)


class SaveLoop:
    """Queues runs to save and writes them, retrying failures (`retry`)."""

    def __init__(
        self, store: GraphStore, persister: Persister, retry: RetryPolicy = SAVE_RETRY
    ) -> None:
        self.store = store
        self.persister = persister
        self.retry = retry
        self._send, self._receive = anyio.create_memory_object_stream[str](1000)
        self._done = anyio.Event()
        self._queued: set[str] = set()  # queued, being saved, or waiting to be retried
        self._again: set[str] = set()  # requests moved while on its way: written after

    async def queue(self, run_id: str) -> None:
        """Save this run soon, unless it is already on its way.

        Once the loop is closed (the controller stopping) the run is left for the next
        controller, whose reconciler finds it finished and unsaved.
        """
        if run_id in self._queued:
            return
        self._queued.add(run_id)
        try:
            await self._send.send(run_id)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._queued.discard(run_id)
            log.info("run.save_deferred", run_id=run_id, reason="the controller is stopping")

    async def requests_moved(self, run_id: str) -> None:
        """A run's requests moved after it may have been saved (its end ended them): its
        save's requests file is written again, now or, if its save is on its way, once
        that save is written (it may have read them before they moved). A run not saved
        yet has them written with its save."""
        if run_id in self._queued:
            self._again.add(run_id)
            return
        await self._write_requests(run_id)

    async def _write_requests(self, run_id: str) -> None:
        try:
            await self.persister.save_requests(run_id)
        except Exception as error:  # the save stays whole; its requests file is older
            log.warning("run.requests_not_rewritten", run_id=run_id, reason=str(error))

    async def close(self) -> None:
        """Stop taking runs; `run` returns once what is queued is written."""
        await self._send.aclose()
        await self._done.wait()

    async def run(self, tasks: TaskGroup, *, task_status: TaskStatus[None]) -> None:
        """Save the runs queued until closed (the reconciler queues those left unsaved)."""
        task_status.started()
        async with self._receive:
            async for run_id in self._receive:
                tries = aiter(self.retry.retrying(on=Exception))
                if not await self._save(run_id, await anext(tries)):
                    tasks.start_soon(self._retry, run_id, tries)
        self._done.set()

    async def _retry(self, run_id: str, tries: Retrying) -> None:
        """Try a failed save again after the policy's backoff until it is written, or
        the loop closed (the next controller's reconciler queues it then)."""
        async for attempt in tries:
            if self._done.is_set() or await self._save(run_id, attempt):
                return

    async def _save(self, run_id: str, attempt: Attempt) -> bool:
        """One try at the run's save; whether it was written (or found written already:
        queued again by a look that read it finished just before its save was written, it
        is not rewritten under a reader who found it saved)."""
        with attempt:
            try:
                if await self.store.state(run_id) == "saved":
                    log.info("run.save_skipped", run_id=run_id, reason="already saved")
                else:
                    await self.persister.save(run_id)
            except Exception as error:  # one bad save must not stop the others
                reason = f"{type(error).__name__}: {error}"
                retry_in_s = attempt.next_wait_s
                if isinstance(error, REDIS_UNAVAILABLE):
                    log.warning(
                        "run.save_failed", run_id=run_id, reason=reason, retry_in_s=retry_in_s
                    )
                else:
                    log.exception("run.save_failed", run_id=run_id, retry_in_s=retry_in_s)
                with contextlib.suppress(*REDIS_UNAVAILABLE):  # the retry records it
                    await self.store.record_save_failure(run_id, reason, attempt.num)
                raise
            self._queued.discard(run_id)
            if run_id in self._again:
                self._again.discard(run_id)
                await self._write_requests(run_id)
            return True
        return False
