"""Coaching requests: each one's visible life, kept in Redis beside its run's graph.

`CoachingRequest` is the record and `RequestStore` its only writer, storing the decisions
of `gencoach.service.coaching.decider` through `apply`; the states and their transitions
are `gencoach.service.coaching.lifecycle`'s table.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final, cast

from pydantic import BaseModel, Field, ValidationError
from redis.asyncio import Redis
from redis.exceptions import NoScriptError, RedisError

from gencoach.config import Limits
from gencoach.config.scrubbing import scrub
from gencoach.constants import Keys
from gencoach.funnel import funnel_row
from gencoach.limits import (
    Admission,
    LimitsReply,
    admission_of,
    lease_ms,
    parse_reply,
    script_text,
    stage_keys,
)
from gencoach.metrics import MetricsRecorder
from gencoach.metrics.catalog import REQUESTS as ARRIVALS
from gencoach.protocol import CoachingProposal
from gencoach.protocol.jobs import DEFAULT_MAX_ATTEMPTS, Diagnosis, JobName
from gencoach.runtime.crashpoints import crash_point
from gencoach.runtime.logs import get_logger
from gencoach.service.coaching.decider import Decision, Event, Refusal, Refused, decide
from gencoach.service.coaching.lifecycle import (
    IN_FLIGHT,
    MAY_ORDER,
    RUNNING,
    TERMINAL,
    TRANSITIONS,
    IllegalTransition,
    RequestState,
    check_opening,
    check_path,
)
from gencoach.service.coaching.router import AgentKind, Route
from gencoach.settling import Settling

log = get_logger("requests")

REQUESTS = "requests"  # the part of `Keys.requests`
# How many times an event is decided again when other writers moved its request first
# (once is the most one writer's report needs: queued to running, reinjected to executed).
APPLY_TRIES = 3

_MOVE: Final = script_text("move")
# How soon reconciliation looks at a request after it moved (it moves on before then
# when all goes well, which pushes the look back).
WATCH_S: Final = 2.0


class Transition(BaseModel):
    """One step of a request's life, with when it happened and why."""

    state: RequestState
    at: float
    reason: str | None = None


class JobRecord(BaseModel):
    """One job a worker did for the request, as its result reported it."""

    job: JobName
    attempt: int
    status: str
    duration_s: float | None = None
    """How long the job ran, as its worker measured it (None from an older worker)."""


class CoachingRequest(BaseModel):
    """A coaching request and everything known about it so far."""

    request_id: str
    run_id: str
    route: Route
    kind: AgentKind | None
    type_coaching: str
    candidate_id: int
    candidate_gen_id: str
    stage_id: int
    human: bool = False
    state: RequestState
    reason: str | None = None
    attempt: int = 1
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    """How many times its job is tried when workers die: `coaching.max_attempts` when it
    was opened, carried by each of its jobs."""
    job: JobName | None = None
    """The job the request waits for or runs (while queued or running). `queued` means it
    waits on its RQ queue for a worker; the worker that takes it moves the request to the
    job's running state in the call that first renews its slot, before any work
    (`gencoach.workers.lease`)."""
    diagnosis: Diagnosis | None = None
    proposals: list[CoachingProposal] = Field(default_factory=list)
    rewrite: str | None = None
    attempt_ids: list[int] = Field(default_factory=list)
    history: list[Transition] = Field(default_factory=list)
    jobs: list[JobRecord] = Field(default_factory=list)
    """Every job result the request received, oldest first."""
    faulty_candidate_id: int | None = None
    """The decision the generator knows to be at fault (its stage end's truth), if it does."""
    faulty_gen_id: str | None = None
    tokens: int = 0
    """Tokens gencoach's backends spent on the request's jobs."""
    offered_points: list[str] = Field(default_factory=list)
    """The reinjection points its repair job offers the agent (`replacement`, and
    `recovery` where the graph allows one), once the job is built."""

    @property
    def selected_id(self) -> int:
        """The decision a correction replaces: the diagnosed one, else the terminal one."""
        return self.diagnosis.step_id if self.diagnosis else self.candidate_id

    def moved(
        self, state: RequestState, reason: str | None = None, **changes: object
    ) -> CoachingRequest:
        """A copy in `state`, its transition recorded with the time and the reason."""
        step = Transition(state=state, at=time.time(), reason=reason)
        return self.model_copy(
            update={"state": state, "reason": reason, "history": [*self.history, step], **changes}
        )


@dataclass(frozen=True)
class AdmissionTerms:
    """The stage limits an admission is checked against, and the slot's lease."""

    limits: Limits
    lease_s: float


@dataclass(frozen=True)
class Applied:
    """What reporting an event did: the request as it now stands, the decision stored
    (None when the event did not apply, `refusal` saying why), and the admission's
    answer for a decision that takes a slot."""

    request: CoachingRequest
    decision: Decision | None = None
    refusal: str | None = None
    admission: Admission | None = None

    @property
    def stored(self) -> bool:
        """Whether the event moved the request."""
        return self.decision is not None


def _part(decision: Decision, terms: AdmissionTerms | None) -> list[str | int]:
    """The stage limits' arguments of the step that stores `decision`."""
    if decision.slot == "admit":
        if terms is None:
            raise ValueError("an admission needs the limits it is checked against")
        limits, request = terms.limits, decision.request
        return [
            "admit",
            lease_ms(terms.lease_s),
            limits.max_pending_per_stage,
            limits.max_unproven_per_stage,
            int(request.human),
            request.stage_id,
        ]
    if decision.slot == "renew":
        return ["renew", lease_ms(decision.lease_s)]
    if decision.slot == "prove":
        return ["prove", decision.proven_attempt or 0]
    if decision.slot == "complete":
        pairs = [item for slot, attempt in decision.completions for item in (slot, attempt)]
        return ["complete", decision.request.stage_id, *pairs]
    return [decision.slot]


def _note_late(request: CoachingRequest, outcomes: str) -> None:
    """Warn of completions that were not on time: a lease that lapsed before its branch
    was recorded (the branch counts all the same), or a slot completed as another attempt."""
    if set(outcomes.split(",")) - {"completed", "duplicate"}:
        log.warning("limits.late_completion", request_id=request.request_id, outcomes=outcomes)


def deadline_member(run_id: str, request_id: str) -> str:
    """A request's member in `Keys.request_deadlines`: its run id and id, as JSON (a run id
    may hold any character the id rule allows)."""
    return json.dumps([run_id, request_id])


def _from_member(member: bytes | str) -> tuple[str, str]:
    run_id, request_id = json.loads(member)
    return str(run_id), str(request_id)


def _due(after_s: float) -> int:
    """The deadline `after_s` seconds from now, in ms since the epoch."""
    return int((time.time() + after_s) * 1000)


def job_of(request: CoachingRequest) -> JobName | None:
    """The job a request waits for or runs, None when it has none in hand."""
    if request.state == "queued":
        return request.job
    return next((job for job, state in RUNNING.items() if state == request.state), None)


def request_id_for(run_id: str, candidate_id: int, route: str) -> str:
    """The id of the request a route opens on a candidate: the same opportunity seen twice
    (a re-delivered event, a second controller) is one request."""
    return f"{run_id}:{candidate_id}:{route}"


class RequestStore:
    """Reads requests, and writes them: creation is idempotent, and every later write is
    a decision of the decider on an event (`apply`), a compare-and-set that carries the
    stage limits' part of it (`lua/limits_move.lua`).

    Each write states the request it starts from: when the stored record has moved on
    since (another writer's transition, a re-delivered result, a stale snapshot), nothing
    is written, and `apply` decides the event again on the request as stored. Each
    transition is counted once, when it is stored (`gencoach_requests_total`), including
    those a decision passes through. A request that holds a pending slot gives it back in
    the same step that ends it, and one that stops being able to publish a branch order
    checks whether its run is now settled (`gencoach.settling`).
    """

    def __init__(
        self,
        client: Redis,
        keys: Keys,
        metrics: MetricsRecorder | None = None,
        lease_s: Callable[[], float] | None = None,
    ) -> None:
        self.client = client
        self.keys = keys
        self.metrics = metrics or MetricsRecorder()
        self._move = client.register_script(_MOVE)
        self.watch_s = WATCH_S
        self._lease_s = lease_s
        self._settling = Settling(client, keys)

    def _look_s(self, moved: CoachingRequest) -> float:
        """How soon reconciliation looks at a request that moved: one in flight a third of
        a lease later (its slot is renewed by then, or found lapsed; as every later look),
        when the stage leases' length is known, any other `watch_s` later."""
        if self._lease_s is not None and moved.state in IN_FLIGHT:
            return max(self.watch_s, self._lease_s() / 3)
        return self.watch_s

    def _arrived(self, request: CoachingRequest, recorded: int) -> None:
        """Count the transitions `request` holds beyond the first `recorded`, in its
        funnel row (its route, or `human`)."""
        row = funnel_row(request.route, request.human)
        for step in request.history[recorded:]:
            self.metrics.inc(ARRIVALS, row, step.state)

    def _key(self, run_id: str) -> str:
        return self.keys.requests(run_id)

    async def create(self, request: CoachingRequest, refused: str | None = None) -> bool:
        """Store a new request; False (and nothing written) if its id already exists.

        With `refused` (a route switched off, a kind the agent does not offer), the request
        is stored as `decide` ends it, `skipped`, in the same single write: it needs no
        look, and the routing of its terminal, which follows, answers its run's settle
        probe."""
        check_opening(request.request_id, request.state)
        stored = request
        if refused is not None:
            decided = decide(request, Refused(refused))
            assert isinstance(decided, Decision), "an opportunity is always refusable"
            stored = decided.request
        pipe = self.client.pipeline(transaction=False)
        if stored.state not in TERMINAL:
            # The deadline first, in the same round trip: a request is never left unwatched,
            # and a deadline without its request is dropped by the look that finds none.
            pipe.zadd(
                self.keys.request_deadlines,
                {deadline_member(request.run_id, request.request_id): _due(self.watch_s)},
                nx=True,
            )
        pipe.hsetnx(self._key(request.run_id), request.request_id, scrub(stored.model_dump_json()))
        created = (await pipe.execute())[-1]
        if created:
            self._arrived(stored, 0)
            for step in stored.history:
                crash_point(f"request:{request.route}:{step.state}")
            if stored.state in TERMINAL:
                log.info("coaching.ended", state=stored.state, reason=stored.reason,
                         route=stored.route, request_id=stored.request_id)  # fmt: skip
        return bool(created)

    async def apply(
        self, request: CoachingRequest, event: Event, terms: AdmissionTerms | None = None
    ) -> Applied:
        """Report `event` about `request`: store what `decide` makes of it, with its stage
        limits' part, in one step. When another writer moved the request since it was
        read, the event is decided again on the request as it now stands (a result that
        arrives while the request is seen started, an outcome while it is seen executed),
        so nothing is lost between a read and a write. An admission needs `terms`."""
        for _ in range(APPLY_TRIES):
            decided = decide(request, event)
            if isinstance(decided, Refusal):
                # Refused on the reporter's copy: on the stored request, if it moved on?
                stored = await self.get(request.run_id, request.request_id)
                if stored is not None and stored.history != request.history:
                    request = stored
                    continue
                log.debug("request.event_refused", request_id=request.request_id,
                          kind=type(event).__name__, reason=decided.reason)  # fmt: skip
                return Applied(request, refusal=decided.reason)
            reply = await self._call(request, decided.request, _part(decided, terms))
            if reply.outcome == "moved":
                ended = decided.request
                # Every end but a proof (logged as `coaching.proven`, with its attempt).
                if ended.state in TERMINAL and ended.state != "proven":
                    log.info("coaching.ended", state=ended.state, reason=ended.reason,
                             route=ended.route)  # fmt: skip
                if decided.slot == "complete":
                    _note_late(request, reply.detail)
                admission = None
                if decided.slot == "admit" and terms is not None:
                    admission = admission_of(replace(reply, outcome=reply.detail), terms.limits)
                return Applied(decided.request, decided, admission=admission)
            if reply.outcome == "refused":
                admission = None
                if decided.slot == "admit" and terms is not None:
                    admission = admission_of(reply, terms.limits)
                return Applied(request, refusal=reply.detail, admission=admission)
            stored = await self.get(request.run_id, request.request_id)
            if stored is None:
                return Applied(request, refusal="the request is gone")
            request = stored
        return Applied(request, refusal=f"moved by other writers {APPLY_TRIES} times in a row")

    async def _call(
        self, current: CoachingRequest, moved: CoachingRequest, part: list[str | int]
    ) -> LimitsReply:
        recorded = len(current.history)
        # `moved` must extend `current`'s history and be in the state its history ends in.
        last = moved.history[-1].state if moved.history else current.state
        if moved.history[:recorded] != current.history or moved.state != last:
            raise IllegalTransition(
                current.request_id, current.state, moved.state, TRANSITIONS[current.state]
            )
        check_path(
            current.request_id,
            [current.state, *(step.state for step in moved.history[recorded:])],
        )
        keys = [*stage_keys(self.keys, current.run_id, current.stage_id), self._key(current.run_id)]
        args: list[str | int] = [
            current.request_id,
            current.state,
            current.attempt,
            recorded,
            scrub(moved.model_dump_json()),
            *part,
        ]
        if moved.state not in MAY_ORDER:
            # Ended, or waiting only for its branches' outcome, which the run's events
            # report: no look is needed (a crash before this leaves one that finds it so).
            reply = parse_reply(await self._move(keys=keys, args=args))
            if reply.outcome == "moved" and current.state in MAY_ORDER:
                await self.unwatch(moved.run_id, moved.request_id)
        elif current.state == "queued" and moved.state in RUNNING.values():
            # A job taken (usually just after it was queued): the look its queueing set
            # comes sooner than this move's would, finds it running, and sets the next.
            reply = parse_reply(await self._move(keys=keys, args=args))
        else:
            # Looked at soon whatever the write's outcome: a look at a request that did not
            # move finds it as it is, while a deadline written after the move could be lost.
            pipe = self.client.pipeline(transaction=False)
            pipe.zadd(
                self.keys.request_deadlines,
                {deadline_member(moved.run_id, moved.request_id): _due(self._look_s(moved))},
            )
            pipe.evalsha(self._move.sha, len(keys), *keys, *args)
            _, raw = await pipe.execute(raise_on_error=False)
            if isinstance(raw, NoScriptError):  # a Redis restarted since the script loaded
                raw = await self._move(keys=keys, args=args)
            elif isinstance(raw, Exception):
                raise raw
            reply = parse_reply(raw)
        if reply.outcome == "moved":
            self._arrived(moved, recorded)
            for step in moved.history[recorded:]:
                crash_point(f"request:{moved.route}:{step.state}")
            if current.state in MAY_ORDER and moved.state not in MAY_ORDER:
                await self._settled_check(current.run_id)
        else:
            log.info(
                "request.write_refused",
                request_id=current.request_id,
                source=current.state,
                target=moved.state,
                outcome=reply.outcome,
                detail=reply.detail,
            )
        return reply

    async def _settled_check(self, run_id: str) -> None:
        """A request stopped publishing orders: answer its run's settle probe if that settles
        the run. A failed check is logged, not raised: the move is done, and the next check
        (or the generator's own bound) still ends the wait."""
        try:
            await self._settling.check(run_id)
        except RedisError as error:
            log.warning("settle.check_failed", run_id=run_id, error=str(error))

    async def get(self, run_id: str, request_id: str) -> CoachingRequest | None:
        """One request, or None."""
        raw = await self.client.hget(self._key(run_id), request_id)
        return CoachingRequest.model_validate_json(raw) if raw is not None else None

    async def known_or_stored(
        self, run_id: str, request_id: str, known: str | None
    ) -> CoachingRequest | None:
        """The request as `known` has it (a copy of its record another process passed on
        with a job or a result), else as stored. Moving on from a stale copy costs one read
        more (`apply` compares and sets), never a lost update."""
        if known is not None:
            try:
                request = CoachingRequest.model_validate_json(known)
            except ValidationError:
                log.warning("request.copy_refused", run_id=run_id, request_id=request_id)
            else:
                if (request.run_id, request.request_id) == (run_id, request_id):
                    return request
        return await self.get(run_id, request_id)

    async def due(self, limit: int) -> list[tuple[str, str]]:
        """The requests reconciliation should look at now (run id, request id), soonest
        first, at most `limit`."""
        members = await self.client.zrangebyscore(
            self.keys.request_deadlines, "-inf", _due(0.0), start=0, num=limit
        )
        return [_from_member(cast(bytes, member)) for member in members]

    async def watch(self, request: CoachingRequest, after_s: float, *, xx: bool = False) -> None:
        """Have reconciliation look at `request` again in `after_s` seconds (with `xx`, only
        if it is still watched: a request that ended meanwhile stays unwatched)."""
        member = deadline_member(request.run_id, request.request_id)
        await self.client.zadd(self.keys.request_deadlines, {member: _due(after_s)}, xx=xx)

    async def unwatch(self, run_id: str, request_id: str) -> None:
        """Stop looking at a request (it ended, or nothing is lost while it waits)."""
        await self.client.zrem(self.keys.request_deadlines, deadline_member(run_id, request_id))

    async def all(self, run_id: str) -> list[CoachingRequest]:
        """Every request of a run, oldest first."""
        raw = await self.client.hgetall(self._key(run_id))
        requests = [CoachingRequest.model_validate_json(value) for value in raw.values()]
        return sorted(requests, key=lambda r: (r.history[0].at if r.history else 0, r.request_id))

    async def in_flight(self, run_ids: list[str]) -> list[CoachingRequest]:
        """Requests admitted and not yet answered, across the given runs."""
        found: list[CoachingRequest] = []
        for run_id in run_ids:
            found.extend(r for r in await self.all(run_id) if r.state in IN_FLIGHT)
        return found
