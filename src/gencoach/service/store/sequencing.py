"""Applying generation events to run graphs in `seq` order, each exactly once.

`Sequencer` applies each run's events through `lua/apply_events.lua`, parking those that
follow a gap until it fills or can fill no more (`sweep`); `script_args` and
`event_from_args` translate events for the script. See docs/events.md, "Order".
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Final, Literal

import redis.exceptions
from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from gencoach.constants import CONTROLLER_GROUP, Keys
from gencoach.protocol import (
    AnyEvent,
    CandidateCreated,
    CandidateExecuted,
    RunFinished,
    RunStarted,
    SituationCreated,
    parse_event,
    parse_event_json,
)
from gencoach.service.store.nodes import as_text
from gencoach.service.store.runindex import RunIndex
from gencoach.service.store.watches import RunWatches

APPLY_SCRIPT: Final = resources.files("gencoach.service").joinpath("lua/apply_events.lua")

# The parts of a run's state the apply script writes, in its KEYS order.
META, SEQS, SITUATION_IDS, CANDIDATE_IDS = "meta", "seqs", "situation_ids", "candidate_ids"
SITUATIONS, CANDIDATES, EXECUTIONS, LINKS, MEMBERS = (
    "situations",
    "candidates",
    "executions",
    "links",
    "members",
)
# Events waiting for their turn, and events applied from there not yet handed on.
PARKED, RELEASED = "parked", "released"
SCRIPT_PARTS: Final = (
    META,
    SEQS,
    SITUATION_IDS,
    CANDIDATE_IDS,
    SITUATIONS,
    CANDIDATES,
    EXECUTIONS,
    LINKS,
    MEMBERS,
    PARKED,
    RELEASED,
)
DEFAULT_GAP_TIMEOUT_S: Final = 30.0
# Waiting runs looked at per sweep, those waiting longest first.
SWEEP_BATCH: Final = 1000

_EVENT_FIELDS: Final = frozenset({"type", "run_id", "seq", "events"})
_HASH_TAG_CHARS: Final = frozenset("{}")


@dataclass(frozen=True)
class Applied:
    """What applying one event did: `ok` (with the node's storage id), `dup`, `err` (with
    why) or `parked` (it waits for its turn)."""

    outcome: Literal["ok", "dup", "err", "parked"]
    storage_id: int | None = None
    reason: str = ""
    # For a `dup`: the seq waits in parked already (so nothing of it is applied yet).
    waiting: bool = False


@dataclass(frozen=True)
class Released:
    """An event applied from parked, and the seqs it went without (`run.started` for a
    run that never started)."""

    run_id: str
    seq: int
    event: AnyEvent
    applied: Applied
    missing: str


@dataclass
class Applying:
    """What one step did: a result per item given, the events released from parked, and
    per run that waited when its wait times out (0: nothing waits any more)."""

    results: list[Applied] = field(default_factory=list)
    released: list[Released] = field(default_factory=list)
    deadlines: dict[str, float] = field(default_factory=dict)


def _body(event: AnyEvent, *drop: str) -> str:
    return event.model_dump_json(exclude=set(_EVENT_FIELDS) | set(drop))


def script_args(item: AnyEvent) -> list[str]:
    """The arguments of an event for the apply script; the last one is its JSON body."""
    head = [item.type, str(item.seq)]
    match item:
        case RunStarted():
            return [*head, item.model_dump_json()]
        case SituationCreated():
            parent = item.parent_candidate_id or ""
            return [*head, item.situation_id, parent, item.link, _body(item)]
        case CandidateCreated():
            return [*head, item.candidate_id, item.situation_id, _body(item, "situation_id")]
        case CandidateExecuted():
            # Most executions have no feedback of their own: their stored body leaves it out.
            unset = ("feedback",) if item.feedback is None else ()
            return [*head, item.candidate_id, _body(item, *unset)]
        case RunFinished():
            return [*head, _body(item)]


def event_from_args(run_id: str, args: list[str]) -> AnyEvent:
    """The event `script_args` was given."""
    kind, seq = args[0], int(args[1])
    if kind == "run.started":
        return parse_event_json(args[2])
    fields = json.loads(args[-1])
    if kind == "candidate.created":
        fields["situation_id"] = args[3]
    return parse_event({**fields, "type": kind, "run_id": run_id, "seq": seq})


def _applied(outcome: bytes | str, detail: bytes | str) -> Applied:
    kind, text = as_text(outcome), as_text(detail)
    if kind == "ok":
        return Applied("ok", int(text) if text else None)
    if kind == "dup":
        return Applied("dup", waiting=text == "parked")
    if kind == "parked":
        return Applied("parked")
    return Applied("err", reason=text)


def _newest(entry_ids: list[bytes]) -> str:
    """The newest of stream entry ids (they compare as milliseconds, then sequence)."""

    def key(entry_id: bytes) -> tuple[int, int]:
        millis, _, seq = entry_id.partition(b"-")
        return int(millis), int(seq or 0)

    return max(entry_ids, key=key).decode()


def _released(run_id: str, seq: bytes | str, record: bytes) -> Released:
    _, _, body = record.partition(b" ")  # after when it was released
    outcome, detail, args, missing = json.loads(body)
    applied = _applied(outcome, detail)
    return Released(run_id, int(seq), event_from_args(run_id, json.loads(args)), applied, missing)


class Sequencer:
    """Applies events to run graphs in seq order, and releases runs that waited too long.

    A consumer group gives no order across controllers, so a run's event can reach one
    controller before an earlier event of the run that another (perhaps dead) controller
    holds. The apply script applies each event whose turn has come and parks one that
    follows a gap in the run's `parked` hash, in the same atomic step; when the gap fills,
    the parked events apply, in seq order, in that step too. A run's turns start at its
    run.started's seq; events before it wait for it.

    An event applied from parked is kept in the run's `released` hash until the controller
    that applied it has handed it on (forwarded its terminal, dead-lettered its refusal)
    and confirms it (`confirm`), so a controller that dies in between loses nothing: the
    next sweep hands it on again. Runs that wait are listed in the `gaps` sorted set
    (scored by when their wait times out, Redis time) for the sweep.

    A run.started's script call follows, in the same round trip, the run's deadlines for
    reconciliation (`RunWatches`): heard from now, and when to look for its registration.
    """

    def __init__(
        self,
        client: Redis,
        keys: Keys,
        index: RunIndex,
        gap_timeout_s: float = DEFAULT_GAP_TIMEOUT_S,
    ) -> None:
        self.client = client
        self.keys = keys
        self.index = index
        self.gap_timeout_s = gap_timeout_s
        self.watches = RunWatches(client, keys)
        self._script = client.register_script(APPLY_SCRIPT.read_text())

    def _keys(self, run_id: str) -> list[str]:
        return [self.keys.run(run_id, part) for part in SCRIPT_PARTS]

    async def apply(
        self,
        events: Sequence[AnyEvent],
        entry_ids: Sequence[bytes] | None = None,
        *,
        own: bool = False,
    ) -> Applying:
        """Apply events in one round trip: each run's in seq order, by one script call,
        atomic for that run. `entry_ids` are the events' stream entries (what a sweep
        compares with the entries still pending); `own` events (the controller's coached
        branches) apply as they come, outside the generator's order."""
        done = Applying(results=[Applied("err")] * len(events))
        groups: dict[str, list[int]] = {}
        for index, event in enumerate(events):
            if _HASH_TAG_CHARS & set(event.run_id):
                done.results[index] = Applied("err", reason="run_id must not contain '{' or '}'")
            else:
                groups.setdefault(event.run_id, []).append(index)
        mode = "own" if own else "ordered"
        calls: list[tuple[str, list[str | float], bool]] = []
        for run_id, indexes in groups.items():
            indexes.sort(key=lambda index: events[index].seq)
            batch = json.dumps([script_args(events[index]) for index in indexes])
            brought = _newest([entry_ids[index] for index in indexes]) if entry_ids else ""
            started = any(isinstance(events[index], RunStarted) for index in indexes)
            calls.append((run_id, [batch, mode, self.gap_timeout_s, brought], started))
        replies = [reply for reply in await self._execute(calls) if isinstance(reply, list)]
        for (run_id, indexes), reply in zip(groups.items(), replies, strict=True):
            results, released, deadline = reply
            for index, (outcome, detail) in zip(indexes, results, strict=True):
                done.results[index] = _applied(outcome, detail)
            self._take(done, run_id, released, deadline)
        await self._index([*zip(events, done.results, strict=True)], done.released)
        return done

    async def sweep(self) -> Applying:
        """Apply the waiting events of runs whose gap nothing pending in the events stream
        can fill, or whose wait timed out; hand back the released events a controller died
        before handing on.

        Intake runs it every second (its upkeep), on every controller. A gap the stream
        cannot fill any more ends the wait: a run's waiting events apply without the missing
        seqs once no entry of the events stream older than the newest that brought one is
        pending with any controller (a generator that resumed at a higher `start_seq`, an
        event refused before it was applied), or once the run has waited `gap_timeout_s`
        without progress (a controller alive but stuck). Each refusal among them names the
        seqs it went without; a missing event that arrives later still applies if it can.
        """
        done = Applying()
        waiting = await self.client.zrange(self.keys.gaps, 0, SWEEP_BATCH - 1)
        if not waiting:
            return done
        pending = await self._oldest_pending()
        run_ids = [as_text(run_id) for run_id in waiting]
        args: list[str | float] = ["[]", "sweep", self.gap_timeout_s, pending]
        replies = await self._execute([(run_id, args, False) for run_id in run_ids])
        for run_id, (_, released, deadline) in zip(run_ids, replies, strict=True):
            self._take(done, run_id, released, deadline)
        await self._index([], done.released)
        return done

    async def _execute(self, calls: list[tuple[str, list[str | float], bool]]) -> list[Any]:
        """Call the apply script on each run's arguments in one round trip, by its sha
        alone (no `SCRIPT EXISTS` first); each run that starts is watched first, so that no
        crash leaves a run started and unwatched. A Redis that lost the script (a restart,
        `SCRIPT FLUSH`) has it loaded and the round trip made again: the script refuses
        the events it applied already, and the watches' writes are the same again."""
        for loaded in (False, True):
            pipe = self.client.pipeline(transaction=False)
            for run_id, args, started in calls:
                if started:
                    self.watches.started(pipe, run_id)
                keys = self._keys(run_id)
                pipe.evalsha(self._script.sha, len(keys), *keys, *args)
            replies: list[Any] = await pipe.execute(raise_on_error=False)
            lost = any(isinstance(reply, redis.exceptions.NoScriptError) for reply in replies)
            if lost and not loaded:
                await self.client.script_load(self._script.script)
                continue
            for reply in replies:
                if isinstance(reply, Exception):
                    raise reply
            return replies
        raise AssertionError("unreachable: the second round trip returns or raises")

    async def _oldest_pending(self) -> str:
        """The oldest entry of the events stream some controller holds ("" if none)."""
        try:
            oldest = await self.client.xpending_range(
                self.keys.events, CONTROLLER_GROUP, "-", "+", 1
            )
        except redis.exceptions.ResponseError as error:
            if "NOGROUP" not in str(error):
                raise
            return ""  # no group: nothing is held
        return as_text(oldest[0]["message_id"]) if oldest else ""

    def confirm(self, pipe: Pipeline, done: Applying) -> None:
        """Add to `pipe` (after what hands the released events on) their confirmation,
        and each waiting run's place in the gaps set."""
        confirmed: dict[str, list[int]] = {}
        for released in done.released:
            confirmed.setdefault(released.run_id, []).append(released.seq)
        for run_id, seqs in confirmed.items():
            pipe.hdel(self.keys.run(run_id, RELEASED), *map(str, seqs))
        for run_id, deadline in done.deadlines.items():
            if deadline > 0:
                pipe.zadd(self.keys.gaps, {run_id: deadline})
            else:
                pipe.zrem(self.keys.gaps, run_id)

    @staticmethod
    def _take(done: Applying, run_id: str, released: list[bytes], deadline: bytes | str) -> None:
        pairs = zip(released[::2], released[1::2], strict=True)
        items = [_released(run_id, seq, record) for seq, record in pairs]
        done.released.extend(sorted(items, key=lambda item: item.seq))  # a sweep's are not
        wait = float(deadline)
        if wait >= 0:
            done.deadlines[run_id] = wait

    async def _index(self, given: list[tuple[AnyEvent, Applied]], released: list[Released]) -> None:
        # The runs index lives outside the runs' hash slots, so it is written after the
        # script; a re-delivered run.started or run.finished (a "dup", not one waiting in
        # parked) writes it again, so a crash in between loses nothing. A finished run
        # stops being watched for silence only once the index has its end.
        pairs = given + [(item.event, item.applied) for item in released]
        started = [
            (event.run_id, event.scenario, event.agent_url)
            for event, applied in pairs
            if isinstance(event, RunStarted) and applied.outcome in ("ok", "dup")
        ]
        finished = [
            event.run_id
            for event, applied in pairs
            if isinstance(event, RunFinished)
            and (applied.outcome == "ok" or (applied.outcome == "dup" and not applied.waiting))
        ]
        await self.index.applied(started, finished)
        await self.watches.ended(finished)
