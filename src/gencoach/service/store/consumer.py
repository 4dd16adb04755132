"""Reading a Redis stream through a consumer group, at least once, until stopped.

`StreamConsumer` feeds the entries to a handler in batches, re-reading its own pending
ones, taking over dead consumers' entries and waiting out Redis outages; `ensure_group`
creates the group. See docs/operations.md, "Several controllers".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import cast

import anyio
import redis.exceptions
from anyio.abc import TaskStatus
from redis.asyncio import Redis

from gencoach.runtime.logs import get_logger
from gencoach.runtime.retrying import UNTIL_REDIS_BACK
from gencoach.service.store.nodes import as_text

log = get_logger("consumer")

Entry = tuple[bytes, dict[bytes, bytes]]
Handler = Callable[[Sequence[Entry]], Awaitable[None]]
# Whether a consumer's controller is alive (holds its lease).
Liveness = Callable[[str], Awaitable[bool]]
Upkeep = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class ConsumerOptions:
    """Which stream and group, who reads, and how."""

    stream: str
    group: str
    consumer: str
    batch_size: int = 500
    block_ms: int = 500
    claim_idle_s: float = 60.0
    claim_every_s: float = 1.0
    # A consumer idle this long without a lease is dead (see `StreamConsumer`).
    lease_s: float = 10.0


async def ensure_group(client: Redis, stream: str, group: str) -> None:
    """Create the consumer group (and the stream) unless it exists."""
    try:
        await client.xgroup_create(stream, group, id="0", mkstream=True)
    except redis.exceptions.ResponseError as error:
        if "BUSYGROUP" not in str(error):
            raise


class StreamConsumer:
    """Feeds a stream's entries to a handler in batches until `stop()`.

    The loop first re-reads the entries this consumer was given but never acknowledged (it
    crashed), then reads new entries in batches. With `alive`, every `claim_every_s` it
    takes over the entries of consumers known dead (idle for `lease_s`, their controller's
    lease lapsed: see `gencoach.service.leases`), without waiting for `claim_idle_s`, and
    drops those consumers from the group; every `claim_idle_s / 4` it also claims any entry
    some consumer has held for `claim_idle_s` (one with no lease, or alive but stuck).
    `upkeep` runs every `claim_every_s` once this consumer's own pending entries were read
    again, so it never runs ahead of them.

    The handler acknowledges what it handled, now or later (the terminals' lanes
    acknowledge each entry once handled); an entry it did not acknowledge is read again
    after a restart, or taken over. While Redis is unreachable the loop waits for it
    (docs/operations.md, "Retries"); when Redis comes back without the group (a restart
    without persistence), the group is created again.
    """

    def __init__(
        self,
        client: Redis,
        options: ConsumerOptions,
        handler: Handler,
        alive: Liveness | None = None,
        upkeep: Upkeep | None = None,
    ) -> None:
        self.client = client
        self.options = options
        self.handler = handler
        self.alive = alive
        self.upkeep = upkeep
        self._stopping = False
        self._running = False
        self._own_pending: bytes | None = b"0"  # where re-reading own pending entries is
        self._next_check = self._next_claim = 0.0

    @property
    def running(self) -> bool:
        """Whether the loop is reading."""
        return self._running

    def stop(self) -> None:
        """Finish the batch in hand, then return from `run`."""
        self._stopping = True

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Read and handle until stopped; Redis outages are waited out (`UNTIL_REDIS_BACK`)."""
        options = self.options
        await ensure_group(self.client, options.stream, options.group)
        self._running = True
        task_status.started()
        try:
            while not self._stopping:
                async for attempt in UNTIL_REDIS_BACK.retrying(
                    log_as="stream.redis_unavailable", stream=options.stream
                ):
                    with attempt:
                        if attempt.num > 1:
                            if self._stopping:
                                break
                            # Unacknowledged, the batch is read again (this consumer's
                            # pending entries, from the start) once Redis is back or has
                            # room: an event Redis accepted is never dropped for it.
                            self._own_pending = b"0"
                        await self._step()
        finally:
            self._running = False

    async def _step(self) -> None:
        """Take over and claim what is due, then read one batch and handle it."""
        options = self.options
        try:
            now = anyio.current_time()
            if now >= self._next_check:
                await self._take_over_dead()
                if self.upkeep is not None and self._own_pending is None:
                    await self.upkeep()
                self._next_check = now + options.claim_every_s
            if now >= self._next_claim:
                await self._claim_abandoned()
                self._next_claim = now + options.claim_idle_s / 4
            entries = await self._read(self._own_pending)
            if self._own_pending is not None:
                self._own_pending = entries[-1][0] if entries else None
            if entries:
                await self.handler(entries)
        except redis.exceptions.ResponseError as error:
            if not str(error).startswith(("NOGROUP", "UNBLOCKED")):
                raise
            # Redis lost the stream and its group (restarted empty, or flushed, perhaps
            # under a blocked read): create them again and go on reading what arrives
            # from now on.
            log.warning("stream.group_recreated", stream=options.stream, group=options.group)
            await ensure_group(self.client, options.stream, options.group)
            self._own_pending = b"0"

    async def _read(self, pending_after: bytes | None) -> list[Entry]:
        """Pending entries after the given id, or (None) new ones."""
        options = self.options
        reply = await self.client.xreadgroup(
            options.group,
            options.consumer,
            {options.stream: pending_after or ">"},
            count=options.batch_size,
            block=None if pending_after else options.block_ms,
        )
        if not reply:
            return []
        entries: list[Entry] = reply[0][1]  # type: ignore[index,assignment]
        return entries

    async def _take_over_dead(self) -> None:
        """Claim every entry of the consumers whose controller died, and drop them."""
        options = self.options
        if self.alive is None:
            return
        idle_ms = int(options.lease_s * 1000)
        try:
            consumers = await self.client.xinfo_consumers(options.stream, options.group)
        except redis.exceptions.ResponseError as error:
            if "no such key" not in str(error):
                raise
            return  # Redis lost the stream: the read finds the group gone and makes it again
        for consumer in consumers:
            name = as_text(consumer["name"])
            if name == options.consumer or int(consumer["idle"]) < idle_ms:
                continue
            if await self.alive(name):
                continue
            taken, cleared = await self._claim_from(name, idle_ms // 2)
            if taken:
                log.warning("stream.taken_over", stream=options.stream, dead=name, count=taken)
            if cleared:  # dropping a consumer drops its pending entries: only an empty one
                await self.client.xgroup_delconsumer(options.stream, options.group, name)

    async def _claim_from(self, dead: str, min_idle_ms: int) -> tuple[int, bool]:
        """Claim and handle a dead consumer's pending entries: how many, and whether it
        holds none any more.

        The idle floor keeps two survivors from both taking an entry: the first claim
        makes it fresh again, and the second finds nothing to claim.
        """
        options = self.options
        taken = 0
        while True:
            pending = await self.client.xpending_range(
                options.stream, options.group, "-", "+", options.batch_size, consumername=dead
            )
            if not pending:
                return taken, True
            ids: list[bytes | str | int | memoryview[int]] = [p["message_id"] for p in pending]
            entries = cast(
                list[Entry],
                await self.client.xclaim(
                    options.stream, options.group, options.consumer, min_idle_ms, ids
                ),
            )
            if not entries:
                return taken, False  # another survivor was first, or they are too fresh
            taken += len(entries)
            await self.handler(entries)

    async def _claim_abandoned(self) -> None:
        options = self.options
        start: bytes | str = "0-0"
        while True:
            reply = await self.client.xautoclaim(
                options.stream,
                options.group,
                options.consumer,
                min_idle_time=int(options.claim_idle_s * 1000),
                start_id=start,
                count=options.batch_size,
            )
            start, entries = reply[0], reply[1]
            if entries:
                log.info("stream.claimed", stream=options.stream, count=len(entries))
                await self.handler(entries)
            if start in (b"0-0", "0-0"):
                return
