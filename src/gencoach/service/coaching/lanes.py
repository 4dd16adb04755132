"""Terminal candidates handled run by run, so that no run's wait delays another's.

`TerminalLanes` hands each entry of the terminals stream to its run's lane, where it is
parked until the run's agent registration has ended, waits for a slot, and is handled.
The phases, the bounds and what a crash loses: docs/coaching.md, "One lane per run".
"""

from __future__ import annotations

import collections
from collections.abc import Awaitable, Callable, Sequence

import anyio
from anyio.abc import TaskGroup, TaskStatus
from redis.asyncio import Redis

from gencoach.config import Settings
from gencoach.constants import CONTROLLER_GROUP, Keys
from gencoach.metrics.exposition import Gauge
from gencoach.runtime.logs import bound, get_logger
from gencoach.runtime.retrying import UNTIL_REDIS_BACK
from gencoach.service.coaching.registry import AgentRegistry
from gencoach.service.isolation import REDIS_UNAVAILABLE, isolated
from gencoach.service.store.consumer import Entry
from gencoach.service.store.nodes import as_text
from gencoach.settling import Settling

log = get_logger("lanes")

PARKED, WAITING, HANDLING = "parked", "waiting", "handling"
PHASES = (PARKED, WAITING, HANDLING)
# How much longer than the registry's own give-up a parked entry waits for it.
GIVE_UP_MARGIN_S = 10.0

# (run id, the generator's candidate id, its storage id when the entry carries it)
TerminalHandler = Callable[[str, str, int | None], Awaitable[None]]


class TerminalLanes:
    """One lane per run for the terminals stream's entries; bounded, never blocking.

    An entry is acknowledged once handled and its terminal recorded as routed (for the
    run's settle probe, `gencoach.settling`); until then it stays pending in the stream,
    so a controller that dies with entries in hand loses none: another takes them over
    once its lease lapses (`gencoach.service.leases`). While alive, `run` re-claims the
    entries held every `claim_idle_s / 3`, so that no other controller takes an entry
    that is merely parked. A registration that has not ended `registration_give_up_s`
    (plus `GIVE_UP_MARGIN_S`) after the entry was parked is logged once for the run, and
    the entry is handled as for an agent that never answered.
    """

    def __init__(
        self,
        client: Redis,
        keys: Keys,
        consumer: str,
        registry: AgentRegistry,
        handle: TerminalHandler,
        settings: Callable[[], Settings],
    ) -> None:
        self.client = client
        self.keys = keys
        self.consumer = consumer
        self.registry = registry
        self.handle = handle
        self.settings = settings
        self.settling = Settling(client, keys)
        section = settings().controller
        self.at_once = section.terminals_at_once
        self.per_run = section.terminals_per_run
        self._all = anyio.CapacityLimiter(self.at_once)
        self._runs: dict[str, anyio.CapacityLimiter] = {}
        self._held: dict[bytes, str] = {}  # entry id -> phase
        self._scopes: dict[bytes, anyio.CancelScope] = {}
        self._by_run: collections.Counter[str] = collections.Counter()
        self._reported: set[str] = set()  # runs whose missing registration was logged
        self._tasks: TaskGroup | None = None
        self._stopping = anyio.Event()

    @property
    def running(self) -> bool:
        """Whether an entry is being handled (parked and waiting ones are re-read later)."""
        return HANDLING in self._held.values()

    async def on_terminals(self, entries: Sequence[Entry]) -> None:
        """Hand a batch of the terminals stream to the runs' lanes, without waiting."""
        if self._stopping.is_set():
            return  # left pending in the stream: read again at the restart
        assert self._tasks is not None, "the lanes run before the terminals are read"
        empty: list[bytes] = []
        for entry_id, fields in entries:
            if not fields:
                empty.append(entry_id)  # trimmed away: nothing to handle
            elif entry_id not in self._held:  # else: read again while in hand
                run_id = as_text(fields[b"run_id"])
                self._held[entry_id] = PARKED
                self._by_run[run_id] += 1
                terminal = f"{as_text(fields[b'candidate_id'])}:{as_text(fields[b'on'])}"
                stored = fields.get(b"storage_id", b"")  # else looked up (an older entry)
                storage_id = int(stored) if stored.isdigit() else None
                self._tasks.start_soon(self._entry, entry_id, run_id, terminal, storage_id)
        if empty:
            await self.client.xack(self.keys.terminals, CONTROLLER_GROUP, *empty)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Keep the lanes until stopped; re-claim held entries so no one else takes them."""
        every_s = self.settings().controller.claim_idle_s / 3
        async with anyio.create_task_group() as tg:
            self._tasks = tg
            task_status.started()
            while not self._stopping.is_set():
                with anyio.move_on_after(every_s):
                    await self._stopping.wait()
                await self._keep_claimed()
            for entry_id, scope in self._scopes.items():
                if self._held.get(entry_id) != HANDLING:
                    scope.cancel()  # pending in the stream: read again at the restart

    def stop(self) -> None:
        """Take no more entries; let those being handled finish."""
        self._stopping.set()

    def gauges(self) -> list[Gauge]:
        """The entries in hand by phase, and the bounds."""
        phases = collections.Counter(self._held.values())
        return [
            Gauge(
                "gencoach_terminals_in_hand",
                "Terminal candidates this controller holds, by phase: parked (their run's "
                "agent registration has not ended), waiting (for a slot), handling.",
                ("phase",),
                {(phase,): phases.get(phase, 0) for phase in PHASES},
            ),
            Gauge(
                "gencoach_terminal_slots",
                "The bound on terminal candidates handled at once: in all, and per run.",
                ("scope",),
                {("all",): self.at_once, ("per_run",): self.per_run},
            ),
        ]

    async def _entry(
        self, entry_id: bytes, run_id: str, terminal: str, storage_id: int | None
    ) -> None:
        scope = self._scopes[entry_id] = anyio.CancelScope()
        try:
            with scope, bound(run_id=run_id):
                lane = self._runs.setdefault(run_id, anyio.CapacityLimiter(self.per_run))
                async with lane:
                    await self._registered(run_id)
                    self._held[entry_id] = WAITING
                    async with self._all:
                        self._held[entry_id] = HANDLING
                        await self._handled(entry_id, run_id, terminal, storage_id)
        finally:
            del self._held[entry_id], self._scopes[entry_id]
            self._by_run[run_id] -= 1
            if not self._by_run[run_id]:
                del self._by_run[run_id], self._runs[run_id]
                self._reported.discard(run_id)

    async def _registered(self, run_id: str) -> None:
        if not self.settings().coaching.enabled:
            return  # nothing to route: the entry is acknowledged at once
        give_up_s = self.settings().controller.registration_give_up_s + GIVE_UP_MARGIN_S
        async for attempt in UNTIL_REDIS_BACK.retrying(  # the entry stays parked meanwhile
            log_as="coach.registration_redis_unavailable"
        ):
            with attempt:
                registered = await self.registry.wait_registered(run_id, give_up_s)
        if registered:
            return
        if run_id not in self._reported:
            self._reported.add(run_id)
            log.error(
                "coach.registration_missing",
                waited_s=give_up_s,
                reason="the run's agent registration never ended; its terminals are "
                "handled as for an agent that never answered",
            )

    async def _handled(
        self, entry_id: bytes, run_id: str, terminal: str, storage_id: int | None
    ) -> None:
        """Handle the entry, record its terminal routed (which may settle the run) and
        acknowledge it; while Redis is away, try again (`UNTIL_REDIS_BACK`)."""
        candidate = terminal.rpartition(":")[0]
        async for attempt in UNTIL_REDIS_BACK.retrying(log_as="coach.terminal_redis_unavailable"):
            with attempt:
                async with isolated("coach.terminal_failed", candidate_id=candidate):
                    await self.handle(run_id, candidate, storage_id)
                await self.settling.routed(run_id, terminal)
                await self.client.xack(self.keys.terminals, CONTROLLER_GROUP, entry_id)

    async def _keep_claimed(self) -> None:
        held: list[bytes | str | int | memoryview[int]] = list(self._held)
        if not held:
            return
        try:
            await self.client.xclaim(
                self.keys.terminals,
                CONTROLLER_GROUP,
                self.consumer,
                min_idle_time=0,
                message_ids=held,
                justid=True,
            )
        except REDIS_UNAVAILABLE as error:
            log.warning("lanes.claim_failed", error=str(error))
