"""Branch orders of many runs read through one consumer group, over one connection.

`OrderReader` reads and hands out the orders of the runs registered with it (its
docstring says how they are delivered and acknowledged; docs/branch-orders.md,
"Acknowledging"); `Item` is what a run receives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio
import redis.asyncio
from anyio.streams.memory import MemoryObjectSendStream

from gencoach.constants import DEFAULT_PREFIX, Keys
from gencoach.errors import ContractError
from gencoach.protocol import BranchOrder, RunSettled
from gencoach.reporting.client import AsyncReporter
from gencoach.reporting.outbox import Ack, parse_entry
from gencoach.runtime.logs import get_logger
from gencoach.runtime.retrying import RetryPolicy

log = get_logger("orders")

Item = BranchOrder | RunSettled
"""What a run receives from its branch stream."""

_NEW = ">"  # the XREADGROUP id of entries never delivered to the group
_BATCH = 100


@dataclass
class _Run:
    send: MemoryObjectSendStream[Item]
    reporter: AsyncReporter | None
    history: str | None = "0"
    """Where the pending entries this consumer still has to be given again start (after
    this id), None once they all were."""


class OrderReader:
    """Reads the branch orders of the runs registered with it, through one consumer group.

    A reader belongs to one generator process, named by a consumer group and a consumer
    that stay the same when the process restarts. Each run it registers gets the group on
    its branch stream, from the stream's first entry, and all the runs' streams are read
    in one blocking XREADGROUP: 64 runs hold one reading connection, not 64.

    A registered run first receives what its consumer had read and not acknowledged
    (after a restart: the orders it had not executed), then each new entry once, in
    order. An order stays pending until the batch that reports its candidate's
    `candidate.executed` acknowledges it (the run's reporter does so in that batch,
    `AsyncReporter.expect_ack`); an order the run will not execute is acknowledged with
    `ack`. `run.settled` answers go to the run's reporter and its stream, and are
    acknowledged at once.

    Registering a run and acknowledging an order ride out a Redis restart, a Redis still
    loading its data set and one refusing writes at its maxmemory, like the reporters'
    calls (`gencoach.runtime.retrying`, for up to `retry_timeout_s`); the reading loop
    tries a failed read again every `block_s` as long as it runs (docs/operations.md,
    "Retries").

    ```python
    reader = OrderReader(client, group="my-campaign")
    async with anyio.create_task_group() as tg:
        tg.start_soon(reader.run)
        send, receive = anyio.create_memory_object_stream[BranchOrder | RunSettled](100)
        await reader.register("run-1", send, reporter)
        async for item in receive:
            ...  # execute an order and report it: its acknowledgement goes with the events
    ```
    """

    def __init__(
        self,
        client: redis.asyncio.Redis,
        *,
        group: str,
        consumer: str = "generator",
        key_prefix: str = DEFAULT_PREFIX,
        block_s: float = 0.5,
        retry_timeout_s: float = 30.0,
    ) -> None:
        self.client = client
        self.retry = RetryPolicy(timeout_s=retry_timeout_s)
        # A failed read is tried again every `block_s`, as long as the reader runs.
        self.reading = RetryPolicy(
            timeout_s=None, wait_initial_s=block_s, wait_max_s=block_s, wait_jitter_s=0
        )
        self.keys = Keys(key_prefix)
        self.group = group
        self.consumer = consumer
        self.block_s = block_s
        self._runs: dict[str, _Run] = {}
        self._entries: dict[tuple[str, str], str] = {}  # (run, branch id) -> entry id
        self._changed = anyio.Event()

    async def register(
        self,
        run_id: str,
        send: MemoryObjectSendStream[Item],
        reporter: AsyncReporter | None = None,
    ) -> None:
        """Deliver the run's entries to `send` from now on: first the ones this consumer
        read and never acknowledged, then new ones. With `reporter`, each order is
        acknowledged by the batch that reports its candidate's execution."""
        stream = self.keys.branches(run_id)
        async for attempt in self.retry.retrying():
            with attempt:
                try:
                    await self.client.xgroup_create(stream, self.group, id="0", mkstream=True)
                except redis.ResponseError as error:
                    if "BUSYGROUP" not in str(error):
                        raise
        self._runs[run_id] = _Run(send, reporter)
        self._changed.set()

    def unregister(self, run_id: str) -> None:
        """Stop reading the run's entries (and close its stream)."""
        found = self._runs.pop(run_id, None)
        if found is not None:
            found.send.close()
        self._entries = {key: entry for key, entry in self._entries.items() if key[0] != run_id}

    async def ack(self, order: BranchOrder) -> None:
        """Acknowledge an order the run will not execute (an unknown anchor, a repeat)."""
        entry = self._entries.pop((order.run_id, order.branch_id), None)
        if entry is not None:
            async for attempt in self.retry.retrying():
                with attempt:
                    await self.client.xack(self.keys.branches(order.run_id), self.group, entry)

    async def run(self) -> None:
        """Read and deliver until cancelled."""
        while True:
            if not self._runs:
                await self._changed.wait()
                self._changed = anyio.Event()
                continue
            async for attempt in self.reading.retrying(
                on=redis.RedisError, log_as="orders.unreadable"
            ):
                with attempt:
                    if self._runs:  # else every run went while Redis was away
                        await self._read_once()

    async def _read_once(self) -> None:
        # Histories first, without blocking (XREADGROUP never blocks on a history).
        positions = {run: state.history for run, state in self._runs.items() if state.history}
        block = None if positions else int(self.block_s * 1000)
        if not positions:
            positions = {run: _NEW for run in self._runs}
        streams: dict[Any, Any] = {self.keys.branches(run): pos for run, pos in positions.items()}
        reply: Any = await self.client.xreadgroup(
            self.group, self.consumer, streams, count=_BATCH, block=block
        )
        by_stream = {self.keys.branches(run): run for run in positions}
        delivered = dict.fromkeys(positions, 0)
        for stream, entries in reply or []:
            run_id = by_stream.get(_text(stream))
            if run_id is not None:
                delivered[run_id] = len(entries)
                await self._deliver(run_id, entries)
        for run_id, position in positions.items():
            state = self._runs.get(run_id)
            if state is not None and position != _NEW and delivered[run_id] < _BATCH:
                state.history = None

    async def _deliver(self, run_id: str, entries: list[tuple[Any, dict[bytes, bytes]]]) -> None:
        run = self._runs.get(run_id)
        if run is None:
            return
        stream = self.keys.branches(run_id)
        done: list[str] = []  # acknowledged at once: answers, unreadable or trimmed entries
        for raw_id, fields in entries:
            entry_id = _text(raw_id)
            if run.history is not None:
                run.history = entry_id
            try:
                item = parse_entry(fields) if fields else None
            except ContractError as error:
                log.warning("orders.entry_unreadable", run_id=run_id, error=str(error))
                item = None
            if isinstance(item, BranchOrder):
                self._entries[(run_id, item.branch_id)] = entry_id
                if run.reporter is not None:
                    run.reporter.expect_ack(item.candidate_id, Ack(stream, self.group, entry_id))
            else:
                done.append(entry_id)
                if isinstance(item, RunSettled) and run.reporter is not None:
                    run.reporter.take_settled(item)
            if item is None:
                continue
            try:
                await run.send.send(item)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                break  # the run ended meanwhile
        if done:
            await self.client.xack(stream, self.group, *done)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
