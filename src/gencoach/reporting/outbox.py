"""A reporter's core, without I/O: what it sends and what it has read (both reporters share it).

`Outbox` is one run's core (its docstring says what it keeps); `Outgoing` is one batch
and `Ack` one order acknowledgement that goes with it (`Outbox.fill` says why in that
order); `parse_entry` reads a branch-stream entry.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gencoach.constants import (
    EVENT_FIELD,
    ORDER_FIELD,
    SETTLED_FIELD,
    TEACHER_STATE_MAX_BYTES,
    Keys,
)
from gencoach.errors import ContractError, ContractViolation
from gencoach.protocol import BranchOrder, RunSettled, parse_event, terminal_of
from gencoach.settling import ask_args, settle_keys

NEXT_SEQ = "next_seq"
"""The generator-state field a batch updates: the seq its next event will carry."""
_ORDER_KEY = ORDER_FIELD.encode()
_SETTLED_KEY = SETTLED_FIELD.encode()


@dataclass(frozen=True)
class Ack:
    """Where an order read through a consumer group is acknowledged."""

    stream: str
    group: str
    entry_id: str


@dataclass
class Outgoing:
    """One batch: events, acknowledgements and generator state, sent together."""

    events: list[dict[str, Any]]
    acks: list[Ack]
    remembered: dict[str, str]
    next_seq: int

    def __bool__(self) -> bool:
        return bool(self.events or self.acks or self.remembered)


def encode(value: Any) -> str:
    """Compact JSON, as every event and state is stored."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def parse_entry(fields: dict[bytes, bytes]) -> BranchOrder | RunSettled:
    """A branch-stream entry: an order or a settled answer; ContractError for anything else."""
    if _ORDER_KEY in fields:
        return BranchOrder.parse_json(fields[_ORDER_KEY])
    if _SETTLED_KEY in fields:
        return RunSettled.parse_json(fields[_SETTLED_KEY])
    names = ", ".join(sorted(key.decode(errors="replace") for key in fields))
    problem = f"holds '{ORDER_FIELD}' or '{SETTLED_FIELD}', not {names or 'no field'}"
    raise ContractError("branch-stream entry", [ContractViolation("fields", problem)])


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


@dataclass
class Outbox:
    """One run's events to send, what goes with them, and what its branch stream said.

    It numbers, validates and buffers events; keeps the order acknowledgements and the
    remembered generator state that go out with the next batch; remembers the terminals
    it reported (for a settle probe) and reads branch-stream entries: orders, and the
    `run.settled` answers that say through which seq no more order will come.
    """

    run_id: str
    keys: Keys
    next_seq: int
    batch_size: int
    pending: list[dict[str, Any]] = field(default_factory=list)
    acks: list[Ack] = field(default_factory=list)
    remembered: dict[str, str] = field(default_factory=dict)
    terminals: dict[str, int] = field(default_factory=dict)
    """The terminals reported and not yet covered by a settled answer: terminal -> seq."""
    settled_seq: int | None = None
    """The highest seq a `run.settled` answer covered."""
    held: list[BranchOrder] = field(default_factory=list)
    """Orders read while waiting to settle, for the next `branch_orders()`."""
    last_entry: str = "0"
    _expected: dict[str, Ack] = field(default_factory=dict)

    def add(self, event_type: str, fields: dict[str, Any]) -> bool:
        """Validate and buffer one event; True when the batch is full."""
        event = {"type": event_type, "run_id": self.run_id, "seq": self.next_seq, **fields}
        parsed = parse_event(event)
        self.pending.append(event)
        terminal = terminal_of(parsed)
        if terminal is not None:
            self.terminals[terminal] = self.next_seq
        if event_type == "candidate.executed":
            ack = self._expected.pop(parsed.candidate_id, None)  # type: ignore[union-attr]
            if ack is not None:
                self.acks.append(ack)
        self.next_seq += 1
        return len(self.pending) >= self.batch_size

    def take(self) -> Outgoing:
        """Everything buffered, as one batch (the buffers empty)."""
        taken = Outgoing(self.pending, self.acks, self.remembered, self.next_seq)
        self.pending, self.acks, self.remembered = [], [], {}
        return taken

    def put_back(self, batch: Outgoing) -> None:
        """Keep a batch that could not be sent for the next flush, before anything newer."""
        self.pending[:0] = batch.events
        self.acks[:0] = batch.acks
        self.remembered = {**batch.remembered, **self.remembered}

    def fill(self, pipe: Any, batch: Outgoing) -> None:
        """Queue a batch's Redis commands on a sync or an async redis-py pipeline.

        One pipeline, in this order: the generator state first (`next_seq` and what the
        generator remembers), then the events, then the acknowledgements of the orders
        whose `candidate.executed` the batch holds. So a generator killed at any point
        either sent an order's execution and acknowledged it, or did neither: a restart
        re-reads exactly the orders it has not executed, and a remembered situation is
        stored before any event that could make gencoach order a branch from it.
        """
        state = {**batch.remembered, NEXT_SEQ: str(batch.next_seq)}
        pipe.hset(self.keys.generator_state(self.run_id), mapping=state)
        for event in batch.events:
            pipe.xadd(self.keys.events, {EVENT_FIELD: encode(event)})
        for ack in batch.acks:
            pipe.xack(ack.stream, ack.group, ack.entry_id)

    def remember(self, name: str, value: Any) -> None:
        """Keep `value` (JSON) under `name` in the run's generator state, with the next batch."""
        if name == NEXT_SEQ:
            raise ValueError(f"{NEXT_SEQ!r} is the reporter's own field of the generator state")
        self.remembered[name] = encode(value)

    def recalled(self, stored: Mapping[bytes | str, bytes | str]) -> dict[str, Any]:
        """The remembered fields of a stored generator state; the numbering goes on from it."""
        state = {_text(name): value for name, value in stored.items()}
        seq = state.pop(NEXT_SEQ, None)
        if seq is not None:
            self.next_seq = max(self.next_seq, int(seq))
        return {name: json.loads(value) for name, value in state.items()}

    def expect_ack(self, candidate_id: str, ack: Ack) -> None:
        """Acknowledge an order with the batch that reports its candidate's execution."""
        self._expected[candidate_id] = ack

    def teacher_entry(self, input_id: int, state: Any) -> tuple[str, str, str]:
        """The hash, field and JSON of a situation's teacher state, or ValueError if too big."""
        value = encode(state)
        size = len(value.encode())
        if size > TEACHER_STATE_MAX_BYTES:
            raise ValueError(
                f"the teacher state of input {input_id} of run {self.run_id} has "
                f"{size} bytes; at most {TEACHER_STATE_MAX_BYTES} are kept"
            )
        return self.keys.teacher_state(self.run_id), str(input_id), value

    @property
    def settled(self) -> bool:
        """Whether a settled answer covers every event sent, and none is left to send."""
        covered = self.settled_seq is not None and self.settled_seq >= self.next_seq - 1
        return covered and not self.pending

    def probe(self) -> tuple[list[str], list[str]]:
        """The settle script's keys and arguments for asking now."""
        args = ask_args(self.run_id, self.next_seq - 1, list(self.terminals))
        return settle_keys(self.keys, self.run_id), args

    def verdict(self, remaining_s: float) -> bool | None:
        """While waiting to settle: True (settled), False (orders came, or no time is left),
        None (read the stream for up to `remaining_s` more)."""
        if self.held:
            return False
        if self.settled:
            return True
        return None if remaining_s > 0 else False

    def take_held(self) -> list[BranchOrder]:
        """The orders read while waiting to settle (now handed over)."""
        held, self.held = self.held, []
        return held

    def orders_query(self, block_s: float) -> tuple[dict[Any, Any], int | None]:
        """XREAD's streams and block time for the run's next entries."""
        stream = self.keys.branches(self.run_id)
        return {stream: self.last_entry}, max(int(block_s * 1000), 1) if block_s > 0 else None

    def read(self, reply: Any) -> list[BranchOrder]:
        """The orders of an XREAD reply; settled answers it holds are taken in."""
        orders: list[BranchOrder] = []
        for _, entries in reply or []:
            for entry_id, fields in entries:
                self.last_entry = _text(entry_id)
                item = parse_entry(fields)
                if isinstance(item, BranchOrder):
                    orders.append(item)
                else:
                    self.take_settled(item)
        return orders

    def take_settled(self, answer: RunSettled) -> None:
        """Take in a settled answer: the terminals it covers are no longer asked about."""
        if self.settled_seq is None or answer.through_seq > self.settled_seq:
            self.settled_seq = answer.through_seq
        through = answer.through_seq
        self.terminals = {key: seq for key, seq in self.terminals.items() if seq > through}
