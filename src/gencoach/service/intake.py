"""Event intake: the events stream, read through a consumer group, applied to run graphs.

At least once from the stream, exactly once in the graph: an entry is acknowledged
only after the Lua script applied it (or refused it, or recognised it as a
duplicate), and the script refuses a `(run_id, seq)` it has seen. Entries a crashed
consumer never acknowledged are read again: this consumer's own on start-up, other
consumers' once they have been idle for `claim_idle_s`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import anyio
import redis.exceptions
from anyio.abc import TaskStatus
from redis.asyncio import Redis

from gencoach.constants import CONTROLLER_GROUP, EVENT_FIELD, Keys
from gencoach.errors import ContractError
from gencoach.logs import get_logger
from gencoach.protocol import AnyEvent, parse_event_json
from gencoach.service.graphstore import Applied, GraphStore

_EVENT_KEY = EVENT_FIELD.encode()

log = get_logger("intake")

Entry = tuple[bytes, dict[bytes, bytes]]
AppliedHook = Callable[[list[tuple[AnyEvent, Applied]]], Awaitable[None]]


@dataclass
class IntakeCounters:
    """What intake has done since it started, for status and metrics."""

    applied: int = 0
    duplicates: int = 0
    dead: int = 0
    batches: int = 0
    by_type: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class IntakeOptions:
    """How intake reads: batch size, blocking time, and when to claim others' entries."""

    consumer: str
    batch_size: int = 500
    block_ms: int = 500
    claim_idle_s: float = 60.0
    claim_every_s: float = 5.0


async def ensure_group(client: Redis, keys: Keys) -> None:
    """Create the controllers' consumer group (and the stream) unless it exists."""
    try:
        await client.xgroup_create(keys.events, CONTROLLER_GROUP, id="0", mkstream=True)
    except redis.exceptions.ResponseError as error:
        if "BUSYGROUP" not in str(error):
            raise


class Intake:
    """Reads the events stream in batches and applies each event to its run's graph."""

    def __init__(
        self,
        client: Redis,
        keys: Keys,
        store: GraphStore,
        options: IntakeOptions,
        on_applied: AppliedHook | None = None,
    ) -> None:
        self.client = client
        self.keys = keys
        self.store = store
        self.options = options
        self.on_applied = on_applied
        self.counters = IntakeCounters()
        self._stopping = anyio.Event()
        self._running = False

    @property
    def running(self) -> bool:
        """Whether the loop is reading the stream."""
        return self._running

    def stop(self) -> None:
        """Ask the loop to finish the batch in hand, acknowledge it, and return."""
        self._stopping.set()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Read and apply until stopped; survives Redis outages by retrying with backoff."""
        await ensure_group(self.client, self.keys)
        self._running = True
        task_status.started()
        log.info("intake.started", consumer=self.options.consumer, stream=self.keys.events)
        backoff_s = 0.1
        own_pending = True
        next_claim = 0.0
        try:
            while not self._stopping.is_set():
                try:
                    if anyio.current_time() >= next_claim:
                        await self._claim_abandoned()
                        next_claim = anyio.current_time() + self.options.claim_every_s
                    entries = await self._read(pending=own_pending)
                    if own_pending and not entries:
                        own_pending = False
                        continue
                    if entries:
                        await self.process(entries)
                    backoff_s = 0.1
                except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as error:
                    log.warning("intake.redis_unavailable", error=str(error), retry_in_s=backoff_s)
                    with anyio.move_on_after(backoff_s):
                        await self._stopping.wait()
                    backoff_s = min(backoff_s * 2, 5.0)
        finally:
            self._running = False
            log.info("intake.stopped", **vars(self.counters))

    async def _read(self, *, pending: bool) -> list[Entry]:
        streams = {self.keys.events: "0" if pending else ">"}
        reply = await self.client.xreadgroup(
            CONTROLLER_GROUP,
            self.options.consumer,
            streams,  # type: ignore[arg-type]
            count=self.options.batch_size,
            block=None if pending else self.options.block_ms,
        )
        if not reply:
            return []
        entries: list[Entry] = reply[0][1]  # type: ignore[index,assignment]
        return entries

    async def _claim_abandoned(self) -> None:
        """Take over entries other consumers read but never acknowledged, and apply them."""
        start = "0-0"
        idle_ms = int(self.options.claim_idle_s * 1000)
        while True:
            reply = await self.client.xautoclaim(
                self.keys.events,
                CONTROLLER_GROUP,
                self.options.consumer,
                min_idle_time=idle_ms,
                start_id=start,
                count=self.options.batch_size,
            )
            start, entries = reply[0], reply[1]
            if entries:
                log.info("intake.claimed", count=len(entries))
                await self.process(entries)
            if start in (b"0-0", "0-0"):
                return

    async def process(self, entries: Sequence[Entry]) -> None:
        """Apply a batch, dead-letter what cannot be applied, then acknowledge all of it."""
        parsed: list[tuple[bytes, bytes, AnyEvent]] = []
        dead: list[tuple[bytes, dict[bytes, bytes], str]] = []
        for entry_id, fields in entries:
            if not fields:
                continue  # trimmed from the stream while pending: nothing left to apply
            raw = fields.get(_EVENT_KEY)
            if raw is None:
                dead.append((entry_id, fields, "the stream entry has no 'event' field"))
                continue
            try:
                parsed.append((entry_id, raw, parse_event_json(raw)))
            except ContractError as error:
                dead.append((entry_id, fields, str(error)))
        results = await self.store.apply([event for _, _, event in parsed]) if parsed else []
        done: list[tuple[AnyEvent, Applied]] = []
        for (entry_id, raw, event), applied in zip(parsed, results, strict=True):
            if applied.outcome == "err":
                reason = f"{event.type} seq {event.seq} of run {event.run_id}: {applied.reason}"
                dead.append((entry_id, {_EVENT_KEY: raw}, reason))
            elif applied.outcome == "dup":
                self.counters.duplicates += 1
            else:
                done.append((event, applied))
        pipe = self.client.pipeline(transaction=False)
        for entry_id, fields, reason in dead:
            payload = fields.get(_EVENT_KEY) or json.dumps(_decoded(fields)).encode()
            pipe.xadd(
                self.keys.dead_events,
                {"event": payload, "reason": reason, "entry_id": entry_id},
            )
            log.warning("intake.dead_letter", entry_id=entry_id.decode(), reason=reason)
        pipe.xack(self.keys.events, CONTROLLER_GROUP, *(entry_id for entry_id, _ in entries))
        await pipe.execute()
        self.counters.batches += 1
        self.counters.dead += len(dead)
        self.counters.applied += len(done)
        for event, _ in done:
            self.counters.by_type[event.type] = self.counters.by_type.get(event.type, 0) + 1
        if done and self.on_applied is not None:
            await self.on_applied(done)


def _decoded(fields: dict[bytes, bytes]) -> dict[str, str]:
    return {
        key.decode(errors="replace"): value.decode(errors="replace")
        for key, value in fields.items()
    }
