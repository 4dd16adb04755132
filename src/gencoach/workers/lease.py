"""Keep a job's pending slot alive while it works, and stop the job once nobody waits for it.

The controller admits a request with a lease on its stage's pending slot (see
`gencoach.limits`); the job renews it every `lease_s / 3`. When a renewal finds
the lease gone (lapsed before the renewal, or released or reclaimed by the controller),
the controller will not use the result: the job is cancelled, and its result says which.
So is a work-horse whose worker process died (it was re-parented): RQ counts that job as
lost, and a horse must never outlive its worker.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Literal

import anyio
import anyio.abc
import redis.asyncio

from gencoach.constants import Keys
from gencoach.limits import Renewal, StageLimits
from gencoach.logs import get_logger
from gencoach.protocol.jobs import LeaseRef

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
    """The state of a held lease: how often it was renewed, and why the job was stopped."""

    lease: LeaseRef
    renewals: int = 0
    lost_by: LostBy | None = None

    @property
    def reason(self) -> str | None:
        """Why the job was stopped, for its result; None while the lease held."""
        if self.lost_by == "run":
            if self.renewals == 0:
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
                "or reclaimed its pending slot (the request ended or was retried)"
            )
        if self.lost_by == "worker":
            return "the worker process running the job died"
        return None


@asynccontextmanager
async def hold_lease(
    client: redis.asyncio.Redis,
    keys: Keys,
    lease: LeaseRef,
    *,
    parent_pid: int | None = None,
    interval_s: float | None = None,
) -> AsyncIterator[LeaseHold]:
    """Renew `lease` now and every `lease_s / 3` during the block; cancel the block if it is lost.

    With `parent_pid`, the block is cancelled too when this process stops being that
    process's child. After a cancellation the block exits quietly with `lost_by` set; an
    exception raised by the block propagates as itself.
    """
    hold = LeaseHold(lease)
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


async def _renew(client: redis.asyncio.Redis, keys: Keys, hold: LeaseHold) -> bool:
    lease = hold.lease
    try:
        renewal = await renew_lease(client, keys, lease)
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
    hold.renewals += 1
    log.debug("lease.renewed", request_id=lease.request_id, renewals=hold.renewals)
    return True


async def _run_ended(client: redis.asyncio.Redis, keys: Keys, run_id: str) -> bool:
    """Whether the run finished (or was saved): then that is why its lease is gone."""
    try:
        state = await client.hget(keys.run(run_id, "meta"), "state")
    except (redis.RedisError, OSError):
        return False
    return state in (b"finished", b"saved")
