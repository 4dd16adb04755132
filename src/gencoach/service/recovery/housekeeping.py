"""Keeping Redis bounded for a daemon that runs for weeks.

`Housekeeper` trims the group-read streams, gives the keys a crash or a late write left
without an expiry one, and keeps the runs index true to the runs' own state, every
`controller.housekeeping_s`; see docs/operations.md, "Bounded state".
"""

from __future__ import annotations

from typing import Any

import anyio
import redis.exceptions
from anyio.abc import TaskStatus
from redis.asyncio import Redis

from gencoach.constants import Keys
from gencoach.runtime.logs import get_logger
from gencoach.service.store.graphstore import META
from gencoach.service.store.nodes import as_text
from gencoach.service.store.runindex import RunIndex

log = get_logger("housekeeping")

_SCAN_COUNT = 500
ORPHAN_IDLE_S = 600
# The sweep for leftovers reads the TTL of every run key Redis holds, so it runs seldom:
# every 20th pass (every 10 minutes with the default `controller.housekeeping_s` of 30 s).
LEFTOVERS_EVERY = 20


def _id_tuple(entry_id: str) -> tuple[int, int]:
    millis, _, seq = entry_id.partition("-")
    return int(millis), int(seq or 0)


class Housekeeper:
    """The periodic trimming and expiry pass.

    The dead-letter stream is not trimmed here: it is capped when written
    (`controller.dead_letters_kept`).
    """

    def __init__(self, client: Redis, keys: Keys, saved_ttl_s: int, every_s: float) -> None:
        self.client = client
        self.keys = keys
        self.saved_ttl_s = saved_ttl_s
        self.every_s = every_s
        self.index = RunIndex(client, keys)
        self._stopping = anyio.Event()

    def stop(self) -> None:
        """End the loop after the pass in hand."""
        self._stopping.set()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Keep house every `every_s` until stopped."""
        task_status.started()
        passes = 0
        while not self._stopping.is_set():
            with anyio.move_on_after(self.every_s):
                await self._stopping.wait()
            if self._stopping.is_set():
                return
            try:
                passes += 1
                # Not at start: a campaign starting costs no pass over every key; what a
                # crash left without an expiry waits a few minutes more.
                await self.pass_once(leftovers=passes % LEFTOVERS_EVERY == 0)
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as error:
                log.warning("housekeeping.redis_unavailable", error=str(error))
            except Exception:  # the next pass tries again
                log.exception("housekeeping.failed")

    async def pass_once(self, *, leftovers: bool = True) -> None:
        """Trim the group-read streams, expire what finished runs left behind (with
        `leftovers`), and keep the runs index true to the runs' own state."""
        for stream in (self.keys.events, self.keys.terminals, self.keys.results):
            await self.trim(stream)
        if leftovers:
            await self.expire_leftovers()
        await self.check_index()

    async def check_index(self) -> int:
        """Drop expired runs from the runs index and repair a slice of it (`_SCAN_COUNT`
        entries); how many entries were wrong."""
        await self.index.sweep()
        fixed = await self.index.check_slice(_SCAN_COUNT)
        if fixed:
            log.info("runs_index.repaired", runs=fixed)
        return fixed

    async def trim(self, stream: str) -> int:
        """Drop the entries every group of `stream` has acknowledged; return how many.

        The stream is trimmed up to the oldest entry some group has not acknowledged
        (`XTRIM MINID`), so an entry not yet delivered is never dropped either.
        """
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
        """Give an expiry to run keys that have none though their run is saved or gone,
        and index a run whose meta key has no entry in the runs index.

        A key left without an expiry gets `saved_ttl_s` when its run is saved (a key
        written after the save), or when its run is gone and nobody wrote it for
        `ORPHAN_IDLE_S` (a run whose state was lost), so nothing of a run outlives it for
        long. Saving a run already gives its keys their expiry: this only catches what a
        crash or a late write left.

        Keys are looked at a SCAN page (`_SCAN_COUNT`) at a time, their TTLs read in one
        round trip per page, so a pass over many runs never holds the event loop long.
        """
        states: dict[str, Any] = {}
        fixed = 0
        pattern = f"{self.keys.prefix}:run:{{*}}:*"
        cursor = None
        while cursor != 0:
            cursor, found = await self.client.scan(cursor or 0, match=pattern, count=_SCAN_COUNT)
            keys = [
                (as_text(key), run_id)
                for key in found
                if (run_id := _run_of(as_text(key))) is not None
            ]
            pipe = self.client.pipeline(transaction=False)
            for key, _ in keys:
                pipe.ttl(key)
            ttls = await pipe.execute()
            with_meta = [run_id for key, run_id in keys if key == self.keys.run(run_id, META)]
            await self._index_unindexed(with_meta)
            for (key, run_id), ttl in zip(keys, ttls, strict=True):
                if ttl != -1:
                    continue
                if run_id not in states:
                    states[run_id] = await self.client.hget(self.keys.run(run_id, META), "state")
                state = states[run_id]
                # A key of no known run may belong to one about to start: only a key
                # nobody wrote for a while is a leftover.
                orphan = state is None and await self.client.object("idletime", key) > ORPHAN_IDLE_S
                if state == b"saved" or orphan:
                    fixed += await self.client.expire(key, self.saved_ttl_s)
        if fixed:
            log.info("keys.expiry_set", keys=fixed, ttl_s=self.saved_ttl_s)
        return fixed

    async def _index_unindexed(self, run_ids: list[str]) -> None:
        # A run whose start was applied but never indexed (a crash between the two).
        found = await self.index.indexed(run_ids)
        unindexed = [run_id for run_id, known in zip(run_ids, found, strict=True) if not known]
        if unindexed:
            await self.index.repair(unindexed)
            log.info("runs_index.adopted", runs=len(unindexed))


def _run_of(key: str) -> str | None:
    start, end = key.find("{"), key.find("}")
    return key[start + 1 : end] if 0 <= start < end else None
