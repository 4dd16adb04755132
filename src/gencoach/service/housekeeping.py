"""Keeping Redis bounded for a daemon that runs for weeks.

Every `every_s` the controller:
- trims the streams every consumer group reads (`events`, `terminals`, `results`) up
  to the oldest entry some group has not acknowledged (`XTRIM MINID`): an entry is
  dropped only once every group has acknowledged it, and an entry not yet delivered
  is never dropped;
- gives every per-run key left without an expiry an expiry of `saved_ttl_s` when its
  run is saved (a key written after the save), or when its run is gone and nobody
  wrote it for `ORPHAN_IDLE_S` (a run whose state was lost), so nothing of a run
  outlives it for long.

The dead-letter stream is capped when written (`controller.dead_letters_kept`), and
the runs index loses runs whose keys expired (the reconciler does that).
"""

from __future__ import annotations

from typing import Any

import anyio
import redis.exceptions
from anyio.abc import TaskStatus
from redis.asyncio import Redis

from gencoach.constants import Keys
from gencoach.logs import get_logger
from gencoach.service.graphstore import META
from gencoach.service.nodes import as_text

log = get_logger("housekeeping")

_SCAN_COUNT = 500
ORPHAN_IDLE_S = 600


def _id_tuple(entry_id: str) -> tuple[int, int]:
    millis, _, seq = entry_id.partition("-")
    return int(millis), int(seq or 0)


class Housekeeper:
    """The periodic trimming and expiry pass."""

    def __init__(self, client: Redis, keys: Keys, saved_ttl_s: int, every_s: float) -> None:
        self.client = client
        self.keys = keys
        self.saved_ttl_s = saved_ttl_s
        self.every_s = every_s
        self._stopping = anyio.Event()

    def stop(self) -> None:
        """End the loop after the pass in hand."""
        self._stopping.set()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Keep house every `every_s` until stopped."""
        task_status.started()
        while not self._stopping.is_set():
            with anyio.move_on_after(self.every_s):
                await self._stopping.wait()
            if self._stopping.is_set():
                return
            try:
                await self.pass_once()
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as error:
                log.warning("housekeeping.redis_unavailable", error=str(error))
            except Exception:  # the next pass tries again
                log.exception("housekeeping.failed")

    async def pass_once(self) -> None:
        """Trim the group-read streams, then expire what finished runs left behind."""
        for stream in (self.keys.events, self.keys.terminals, self.keys.results):
            await self.trim(stream)
        await self.expire_leftovers()

    async def trim(self, stream: str) -> int:
        """Drop the entries every group of `stream` has acknowledged; return how many."""
        try:
            groups = await self.client.xinfo_groups(stream)
        except redis.exceptions.ResponseError:
            return 0  # no such stream yet
        if not groups:
            return 0  # nobody reads it through a group: nothing is known to be done
        bounds = [await self._kept_from(stream, group) for group in groups]
        oldest = min(bounds, key=_id_tuple)
        trimmed: int = await self.client.xtrim(stream, minid=oldest, approximate=False)
        if trimmed:
            log.debug("stream.trimmed", stream=stream, entries=trimmed, kept_from=oldest)
        return trimmed

    async def _kept_from(self, stream: str, group: dict[str, Any]) -> str:
        """The first entry this group may still need: its oldest pending, else its next."""
        if int(group["pending"]):
            summary = await self.client.xpending(stream, as_text(group["name"]))
            if summary["min"] is not None:  # acknowledged since XINFO: fall through
                return as_text(summary["min"])
        millis, seq = _id_tuple(as_text(group["last-delivered-id"]))
        return f"{millis}-{seq + 1}"

    async def expire_leftovers(self) -> int:
        """Give an expiry to run keys that have none though their run is saved or gone."""
        states: dict[str, Any] = {}
        fixed = 0
        pattern = f"{self.keys.prefix}:run:{{*}}:*"
        async for key in self.client.scan_iter(match=pattern, count=_SCAN_COUNT):
            run_id = _run_of(as_text(key))
            if run_id is None or await self.client.ttl(key) != -1:
                continue
            if run_id not in states:
                states[run_id] = await self.client.hget(self.keys.run(run_id, META), "state")
            state = states[run_id]
            # A key of no known run may belong to one about to start: only a key nobody
            # wrote for a while is a leftover.
            orphan = state is None and await self.client.object("idletime", key) > ORPHAN_IDLE_S
            if state == b"saved" or orphan:
                fixed += await self.client.expire(key, self.saved_ttl_s)
        if fixed:
            log.info("keys.expiry_set", keys=fixed, ttl_s=self.saved_ttl_s)
        return fixed


def _run_of(key: str) -> str | None:
    start, end = key.find("{"), key.find("}")
    return key[start + 1 : end] if 0 <= start < end else None
