"""Keep a job's pending slot alive while it works, and stop the job once nobody waits for it.

`hold_lease` reports the job taken (`take`) and renews its lease (`renew_lease`) while the
job works, cancelling it once the lease is lost; `LeaseHold` says how it went. The slots
and their leases: `gencoach.limits`, and docs/budgets.md, "Leases".
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Literal, cast

import anyio
import anyio.abc
import redis.asyncio

from gencoach.constants import Keys
from gencoach.limits import Renewal, StageLimits
from gencoach.metrics import MetricsRecorder
from gencoach.protocol.jobs import JobName, LeaseRef
from gencoach.runtime.logs import get_logger
from gencoach.service.coaching.decider import JobTaken
from gencoach.service.coaching.lifecycle import RUNNING
from gencoach.service.coaching.requests import RequestStore

# How often a horse checks that its worker process is still its parent.
PARENT_CHECK_S = 1.0
# The shortest wait between renewals, whatever the lease.
MIN_INTERVAL_S = 0.05

log = get_logger("lease")

LostBy = Literal["expired", "absent", "run", "worker"]


async def renew_lease(client: redis.asyncio.Redis, keys: Keys, lease: LeaseRef) -> Renewal:
    """Extend the lease to `lease_s` from now, or say why it is gone."""
    limits = StageLimits(client, keys)
    return await limits.renewal(lease.run_id, lease.stage_id, lease.request_id, lease.lease_s)


@dataclass
class LeaseHold:
    """The state of a held lease: whether the job's taking was stored, how often the lease
    was renewed since, and why the job was stopped."""

    lease: LeaseRef
    job: JobName
    attempt: int
    metrics: MetricsRecorder | None = None
    taken: bool = False
    renewals: int = 0
    lost_by: LostBy | None = None
    record: str | None = None
    """The request's record as the taking left it (for the job's result)."""

    @property
    def reason(self) -> str | None:
        """Why the job was stopped, for its result; None while the lease held."""
        if self.lost_by == "run":
            if not self.taken:
                return "the job started after its run finished"
            return "the run finished while the job was running"
        if self.lost_by == "expired":
            return (
                f"lease of request {self.lease.request_id} lapsed before this worker renewed it "
                f"(lease_s {self.lease.lease_s:g}): the worker or its Redis was held up that long"
            )
        if self.lost_by == "absent":
            return (
                f"lease of request {self.lease.request_id} is gone: the controller released "
                "or reclaimed its pending slot, or the request no longer waits for this job "
                "(it ended or was retried)"
            )
        if self.lost_by == "worker":
            return "the worker process running the job died"
        return None


@asynccontextmanager
async def hold_lease(
    client: redis.asyncio.Redis,
    keys: Keys,
    lease: LeaseRef,
    job: JobName,
    attempt: int,
    *,
    metrics: MetricsRecorder | None = None,
    parent_pid: int | None = None,
    interval_s: float | None = None,
) -> AsyncIterator[LeaseHold]:
    """Report the job taken (its request moves to running, its lease renewed) before the
    block, renew `lease` every `lease_s / 3` during it; cancel the block if it is lost.

    The controller holds the lease while the job waits on its queue; taking the job moves
    the request to its running state and renews the slot for the worker in one step, so
    nothing has to ask RQ whether the job started. A lease found gone (lapsed before the
    renewal, or released or reclaimed by the controller) means the controller will not use
    the result: the block is cancelled and `lost_by` says which. With `parent_pid`, the
    block is cancelled too when this process stops being that process's child: RQ counts
    a re-parented work-horse's job as lost, and a horse must never outlive its worker.

    After a cancellation the block exits quietly with `lost_by` set; an exception raised
    by the block propagates as itself.
    """
    hold = LeaseHold(lease, job, attempt, metrics)
    interval = interval_s if interval_s is not None else max(lease.lease_s / 3, MIN_INTERVAL_S)
    error: Exception | None = None
    async with anyio.create_task_group() as group:
        await group.start(_keep, client, keys, hold, interval, parent_pid, group.cancel_scope)
        try:
            yield hold
        except Exception as raised:  # re-raised below, not wrapped in the group's ExceptionGroup
            error = raised
        finally:
            group.cancel_scope.cancel()
    if error is not None:
        raise error


async def _keep(
    client: redis.asyncio.Redis,
    keys: Keys,
    hold: LeaseHold,
    interval_s: float,
    parent_pid: int | None,
    scope: anyio.CancelScope,
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    # The first renewal comes before the job starts: a job whose slot is already gone
    # is cancelled at its first await.
    held = await _renew(client, keys, hold)
    task_status.started()
    next_renewal = anyio.current_time() + interval_s
    while held:
        wait = max(0.0, next_renewal - anyio.current_time())
        await anyio.sleep(min(wait, PARENT_CHECK_S) if parent_pid is not None else wait)
        if parent_pid is not None and os.getppid() != parent_pid:
            hold.lost_by = "worker"
            log.warning(
                "lease.worker_died", parent_pid=parent_pid, request_id=hold.lease.request_id
            )
            break
        if anyio.current_time() >= next_renewal:
            held = await _renew(client, keys, hold)
            next_renewal = anyio.current_time() + interval_s
    scope.cancel()


async def take(client: redis.asyncio.Redis, keys: Keys, hold: LeaseHold) -> Renewal:
    """Report the job taken: its request moves to the job's running state and its lease is
    renewed, in one step (`RequestStore.apply`). A request already running this job and
    attempt (its job run again) only has its lease renewed; one that waits for another job
    or attempt, or has ended, is `absent` to this job; one without a record is held by its
    lease alone."""
    lease = hold.lease
    store = RequestStore(client, keys, hold.metrics, lambda: lease.lease_s)
    request = await store.known_or_stored(lease.run_id, lease.request_id, lease.record)
    if request is None:
        return await renew_lease(client, keys, lease)
    applied = await store.apply(request, JobTaken(hold.job, hold.attempt, lease.lease_s))
    if applied.stored:
        log.info("coaching.started", job=hold.job, attempt=hold.attempt,
                 request_id=lease.request_id)  # fmt: skip
        hold.record = applied.request.model_dump_json()
        return "renewed"
    now = applied.request
    if (now.state, now.job, now.attempt) == (RUNNING[hold.job], hold.job, hold.attempt):
        hold.record = now.model_dump_json()
        return await renew_lease(client, keys, lease)
    if applied.refusal in ("expired", "absent"):
        return cast(Renewal, applied.refusal)
    return "absent"


async def _renew(client: redis.asyncio.Redis, keys: Keys, hold: LeaseHold) -> bool:
    lease = hold.lease
    try:
        renewal = await (
            renew_lease(client, keys, lease) if hold.taken else take(client, keys, hold)
        )
    except (redis.RedisError, OSError) as error:
        # Not proof that the slot is gone: try again at the next tick, while it may hold.
        log.warning("lease.renew_failed", request_id=lease.request_id, error=str(error))
        return True
    if renewal != "renewed":
        hold.lost_by = "run" if await _run_ended(client, keys, lease.run_id) else renewal
        log.warning(
            "lease.lost",
            run_id=lease.run_id,
            stage=lease.stage_id,
            request_id=lease.request_id,
            renewals=hold.renewals,
            lost_by=hold.lost_by,
        )
        return False
    if hold.taken:
        hold.renewals += 1
    hold.taken = True
    log.debug("lease.renewed", request_id=lease.request_id, renewals=hold.renewals)
    return True


async def _run_ended(client: redis.asyncio.Redis, keys: Keys, run_id: str) -> bool:
    """Whether the run finished (or was saved): then that is why its lease is gone."""
    try:
        state = await client.hget(keys.run(run_id, "meta"), "state")
    except (redis.RedisError, OSError):
        return False
    return state in (b"finished", b"saved")
