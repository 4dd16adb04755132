"""Reading a Redis stream through a consumer group, at least once, until stopped.

The loop first re-reads the entries this consumer was given but never acknowledged
(it crashed), then claims those another consumer has held for `claim_idle_s` (it
never came back), then reads new entries in batches. The handler acknowledges what
it handled; an entry it did not acknowledge is read again after a restart. When Redis
is unreachable the loop waits with backoff; when Redis comes back without the group
(a restart without persistence), the group is created again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import anyio
import redis.exceptions
from anyio.abc import TaskStatus
from redis.asyncio import Redis

from gencoach.logs import get_logger

log = get_logger("consumer")

Entry = tuple[bytes, dict[bytes, bytes]]
Handler = Callable[[Sequence[Entry]], Awaitable[None]]


@dataclass(frozen=True)
class ConsumerOptions:
    """Which stream and group, who reads, and how."""

    stream: str
    group: str
    consumer: str
    batch_size: int = 500
    block_ms: int = 500
    claim_idle_s: float = 60.0
    claim_every_s: float = 5.0


async def ensure_group(client: Redis, stream: str, group: str) -> None:
    """Create the consumer group (and the stream) unless it exists."""
    try:
        await client.xgroup_create(stream, group, id="0", mkstream=True)
    except redis.exceptions.ResponseError as error:
        if "BUSYGROUP" not in str(error):
            raise


class StreamConsumer:
    """Feeds a stream's entries to a handler in batches until `stop()`."""

    def __init__(self, client: Redis, options: ConsumerOptions, handler: Handler) -> None:
        self.client = client
        self.options = options
        self.handler = handler
        self._stopping = False
        self._running = False

    @property
    def running(self) -> bool:
        """Whether the loop is reading."""
        return self._running

    def stop(self) -> None:
        """Finish the batch in hand, then return from `run`."""
        self._stopping = True

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Read and handle until stopped; Redis outages are waited out with backoff."""
        options = self.options
        await ensure_group(self.client, options.stream, options.group)
        self._running = True
        task_status.started()
        backoff_s = 0.1
        own_pending = True
        next_claim = 0.0
        try:
            while not self._stopping:
                try:
                    if anyio.current_time() >= next_claim:
                        await self._claim_abandoned()
                        next_claim = anyio.current_time() + options.claim_every_s
                    entries = await self._read(pending=own_pending)
                    if own_pending and not entries:
                        own_pending = False
                    elif entries:
                        await self.handler(entries)
                    backoff_s = 0.1
                except redis.exceptions.ResponseError as error:
                    if not str(error).startswith("NOGROUP"):
                        raise
                    # Redis lost the stream and its group (restarted empty, or flushed):
                    # create them again and go on reading what arrives from now on.
                    log.warning(
                        "stream.group_recreated", stream=options.stream, group=options.group
                    )
                    await ensure_group(self.client, options.stream, options.group)
                    own_pending = True
                except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as error:
                    log.warning(
                        "stream.redis_unavailable",
                        stream=options.stream,
                        error=str(error),
                        retry_in_s=backoff_s,
                    )
                    await anyio.sleep(backoff_s)
                    backoff_s = min(backoff_s * 2, 5.0)
        finally:
            self._running = False

    async def _read(self, *, pending: bool) -> list[Entry]:
        options = self.options
        reply = await self.client.xreadgroup(
            options.group,
            options.consumer,
            {options.stream: "0" if pending else ">"},
            count=options.batch_size,
            block=None if pending else options.block_ms,
        )
        if not reply:
            return []
        entries: list[Entry] = reply[0][1]  # type: ignore[index,assignment]
        return entries

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
