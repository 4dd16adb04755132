"""Event intake: the events stream, read through a consumer group, applied to run graphs.

`Intake` applies each batch through the `Sequencer`, dead-letters what cannot be applied,
forwards what may be coached to the terminals stream and acknowledges the batch;
`terminal_fields` says which events may end something coachable. See docs/events.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import anyio
from anyio.abc import TaskStatus
from redis.asyncio import Redis

from gencoach.constants import CONTROLLER_GROUP, EVENT_FIELD, Keys
from gencoach.errors import ContractError
from gencoach.metrics import MetricsRecorder
from gencoach.metrics.catalog import EVENTS
from gencoach.protocol import (
    AnyEvent,
    CandidateCreated,
    CandidateExecuted,
    RunFinished,
    RunStarted,
    parse_event_json,
)
from gencoach.runtime.logs import get_logger
from gencoach.service.store.consumer import ConsumerOptions, Entry, Liveness, StreamConsumer
from gencoach.service.store.graphstore import GraphStore
from gencoach.service.store.sequencing import Applied, Applying, Released

_EVENT_KEY = EVENT_FIELD.encode()
# How much of an oversized event its dead letter keeps.
_DEAD_EXCERPT = 4096
# The type of a dead-lettered entry that is not an event at all (its metrics label).
UNPARSED = "unparsed"

log = get_logger("intake")

AgentCheck = Callable[[str], bool]


class RunBoundaries(Protocol):
    """The stage told of each run start and end applied (`gencoach.service.runlife`)."""

    def started(self, run_id: str, agent_url: str) -> None: ...

    def finished(self, run_id: str) -> None: ...


class Executions(Protocol):
    """The stage told of each candidate execution applied, by generator id
    (`gencoach.service.branching.reinjection`: a coached candidate's moves its request)."""

    def executed(self, run_id: str, candidate_id: str) -> None: ...


@dataclass
class IntakeCounters:
    """What intake has done since it started, for status and metrics."""

    applied: int = 0
    parked: int = 0
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
    claim_every_s: float = 1.0
    lease_s: float = 10.0
    max_event_bytes: int = 1_048_576
    dead_letters_kept: int = 10_000


def terminal_fields(event: AnyEvent, storage_id: int | None = None) -> dict[str, str] | None:
    """The terminals-stream entry for an event that may end something coachable, with
    the candidate's storage id when the step that applied it knows it."""
    if isinstance(event, CandidateCreated) and event.invalid_reason is not None:
        on = "created"
    elif isinstance(event, CandidateExecuted) and event.stage_end is not None:
        on = "executed"
    else:
        return None
    fields = {"run_id": event.run_id, "candidate_id": event.candidate_id, "on": on}
    if storage_id is not None:
        fields["storage_id"] = str(storage_id)
    return fields


class Intake:
    """Reads the events stream in batches and applies each event to its run's graph.

    At least once from the stream, exactly once in the graph: an entry is acknowledged
    only after the Lua script applied it, parked it for its turn, refused it, or recognised
    it as a duplicate, and the script refuses a `(run_id, seq)` it has seen. A run's events
    apply in seq order whichever controller reads them (`Sequencer`). In the same step,
    before the acknowledgement, every applied event that may end something coachable is
    forwarded to the terminals stream, so a crash never loses an opportunity (a
    re-delivered duplicate is forwarded again; the coaching side is idempotent); events
    applied from parked are confirmed only once forwarded, and handed on again by a sweep
    if this controller dies first.
    """

    def __init__(
        self,
        client: Redis,
        keys: Keys,
        store: GraphStore,
        options: IntakeOptions,
        runs: RunBoundaries | None = None,
        executions: Executions | None = None,
        agent_allowed: AgentCheck | None = None,
        metrics: MetricsRecorder | None = None,
        alive: Liveness | None = None,
    ) -> None:
        self.client = client
        self.metrics = metrics or MetricsRecorder()
        self.keys = keys
        self.store = store
        self.sequencer = store.sequencer
        self.options = options
        self.runs = runs
        self.executions = executions
        self.agent_allowed = agent_allowed
        self.counters = IntakeCounters()
        self._consumer = StreamConsumer(
            client,
            ConsumerOptions(
                stream=keys.events,
                group=CONTROLLER_GROUP,
                consumer=options.consumer,
                batch_size=options.batch_size,
                block_ms=options.block_ms,
                claim_idle_s=options.claim_idle_s,
                claim_every_s=options.claim_every_s,
                lease_s=options.lease_s,
            ),
            self.process,
            alive=alive,
            upkeep=self.sweep,
        )

    @property
    def running(self) -> bool:
        """Whether the loop is reading the stream."""
        return self._consumer.running

    def stop(self) -> None:
        """Ask the loop to finish the batch in hand, acknowledge it, and return."""
        self._consumer.stop()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Read and apply until stopped."""
        log.info("intake.started", consumer=self.options.consumer, stream=self.keys.events)
        try:
            await self._consumer.run(task_status=task_status)
        finally:
            log.info("intake.stopped", **vars(self.counters))

    def refusal(self, event: AnyEvent, size_bytes: int) -> tuple[str, str] | None:
        """The field at fault and why, for a valid event intake still refuses; else None."""
        limit = self.options.max_event_bytes
        if size_bytes > limit:
            reason = (
                f"{event.type} seq {event.seq} of run {event.run_id} is {size_bytes} bytes; "
                f"events are at most {limit} bytes (controller.max_event_bytes)"
            )
            return event.type, reason
        allowed = self.agent_allowed
        if isinstance(event, RunStarted) and allowed and not allowed(event.agent_url):
            reason = (
                f"run.started of run {event.run_id}: agent_url {event.agent_url} is not "
                "allowed: add it (or a prefix of it) to the `agents` list of the "
                "controller's config"
            )
            return "agent_url", reason
        return None

    async def process(self, entries: Sequence[Entry]) -> None:
        """Apply a batch, dead-letter what cannot be applied, then acknowledge all of it."""
        parsed: list[tuple[bytes, bytes, AnyEvent]] = []
        handed = _Handed()
        for entry_id, fields in entries:
            if not fields:
                continue  # trimmed from the stream while pending: nothing left to apply
            raw = fields.get(_EVENT_KEY)
            if raw is None:
                handed.dead_letter(entry_id, fields, "the stream entry has no 'event' field")
                continue
            if len(raw) > self.options.max_event_bytes:
                reason = (
                    f"the event is {len(raw)} bytes; events are at most "
                    f"{self.options.max_event_bytes} bytes (controller.max_event_bytes)"
                )
                handed.dead_letter(entry_id, {_EVENT_KEY: raw[:_DEAD_EXCERPT]}, reason)
                continue
            try:
                event = parse_event_json(raw)
            except ContractError as error:
                handed.dead_letter(entry_id, fields, str(error))
                continue
            refusal = self.refusal(event, len(raw))
            if refusal is not None:
                handed.dead_letter(entry_id, fields, refusal[1], event.type)
                continue
            parsed.append((entry_id, raw, event))
        done = Applying()
        if parsed:
            events = [event for _, _, event in parsed]
            done = await self.sequencer.apply(events, [entry_id for entry_id, _, _ in parsed])
        for (entry_id, raw, event), applied in zip(parsed, done.results, strict=True):
            if applied.outcome == "err":
                reason = f"{event.type} seq {event.seq} of run {event.run_id}: {applied.reason}"
                handed.dead_letter(entry_id, {_EVENT_KEY: raw}, reason, event.type)
            elif applied.outcome == "parked":
                self.counters.parked += 1
                self.metrics.inc(EVENTS, event.type, "parked")
            elif applied.outcome == "dup":
                self.counters.duplicates += 1
                self.metrics.inc(EVENTS, event.type, "duplicate")
                if not applied.waiting:
                    handed.forward(event)
            else:
                handed.applied(event, applied)
        self._take_released(done.released, handed)
        await self._hand_on(handed, done, [entry_id for entry_id, _ in entries])

    async def sweep(self) -> None:
        """Apply the waiting events of runs whose gap can no longer fill (or that waited
        too long), and hand on the released events a controller died before handing on."""
        done = await self.sequencer.sweep()
        if done.released or done.deadlines:
            handed = _Handed()
            self._take_released(done.released, handed)
            await self._hand_on(handed, done, [])

    def _take_released(self, released: list[Released], handed: _Handed) -> None:
        gaps: dict[str, str] = {}
        for item in released:
            event, applied = item.event, item.applied
            if item.missing:
                gaps[item.run_id] = item.missing
            if applied.outcome == "ok":
                handed.applied(event, applied)
            elif applied.outcome == "dup":
                handed.forward(event)
            elif applied.outcome == "err":
                reason = f"{event.type} seq {event.seq} of run {event.run_id}: {applied.reason}"
                reason += self._went_without(item.missing)
                payload = {_EVENT_KEY: event.model_dump_json().encode()}
                handed.dead_letter(b"", payload, reason, event.type)  # acknowledged long ago
        for run_id, missing in gaps.items():
            log.info("intake.gap_released", run_id=run_id, missing=missing)

    @staticmethod
    def _went_without(missing: str) -> str:
        """What a refusal of an event released without the seqs it waited for adds."""
        if missing == "run.started":
            return "; it waited for the run's run.started, which was never applied"
        if missing:
            return f"; it waited for seq {missing} of the run, which never arrived"
        return ""

    async def _hand_on(self, handed: _Handed, done: Applying, ack: list[bytes]) -> None:
        """Forward terminals and dead letters, confirm released events, acknowledge."""
        pipe = self.client.pipeline(transaction=False)
        for terminal in handed.terminals:
            pipe.xadd(self.keys.terminals, terminal)  # type: ignore[arg-type]
        for entry_id, fields, reason, _ in handed.dead:
            payload = fields.get(_EVENT_KEY) or json.dumps(_decoded(fields)).encode()
            pipe.xadd(
                self.keys.dead_events,
                {"event": payload, "reason": reason, "entry_id": entry_id},
                maxlen=self.options.dead_letters_kept,
                approximate=True,
            )
            log.warning("intake.dead_letter", entry_id=entry_id.decode(), reason=reason)
        self.sequencer.confirm(pipe, done)
        if ack:
            pipe.xack(self.keys.events, CONTROLLER_GROUP, *ack)
        await pipe.execute()
        if ack:
            self.counters.batches += 1
        self.counters.dead += len(handed.dead)
        self.counters.applied += len(handed.done)
        for event, _ in handed.done:
            self.counters.by_type[event.type] = self.counters.by_type.get(event.type, 0) + 1
            self.metrics.inc(EVENTS, event.type, "applied")
        for *_, type_ in handed.dead:
            self.metrics.inc(EVENTS, type_, "dead_lettered")
        for event, _ in handed.done:
            if isinstance(event, RunStarted) and self.runs is not None:
                self.runs.started(event.run_id, event.agent_url)
            elif isinstance(event, RunFinished) and self.runs is not None:
                self.runs.finished(event.run_id)
            elif isinstance(event, CandidateExecuted) and self.executions is not None:
                self.executions.executed(event.run_id, event.candidate_id)


@dataclass
class _Handed:
    """What a step hands on: applied events, terminals to forward, dead letters (each:
    its entry id, what it keeps, why, and its event type)."""

    done: list[tuple[AnyEvent, Applied]] = field(default_factory=list)
    terminals: list[dict[str, str]] = field(default_factory=list)
    dead: list[tuple[bytes, dict[bytes, bytes], str, str]] = field(default_factory=list)

    def applied(self, event: AnyEvent, applied: Applied) -> None:
        """An event applied now: its hooks run, its terminal (if any) is forwarded."""
        self.done.append((event, applied))
        self.forward(event, applied.storage_id)

    def forward(self, event: AnyEvent, storage_id: int | None = None) -> None:
        """Forward the event's terminal, if it has one (again, for a duplicate)."""
        terminal = terminal_fields(event, storage_id)
        if terminal is not None:
            self.terminals.append(terminal)

    def dead_letter(
        self, entry_id: bytes, fields: dict[bytes, bytes], reason: str, type_: str = UNPARSED
    ) -> None:
        """Refuse an entry (no entry id for an event applied from parked)."""
        self.dead.append((entry_id, fields, reason, type_))


def _decoded(fields: dict[bytes, bytes]) -> dict[str, str]:
    return {
        key.decode(errors="replace"): value.decode(errors="replace")
        for key, value in fields.items()
    }
