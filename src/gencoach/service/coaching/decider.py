"""What happens to a coaching request, decided in one place.

Callers report what happened as an `Event`; `decide` answers with a `Decision` (the
request's next version and its `Effect`s) or a `Refusal`, following `EVENT_TABLE` and the
state graph of `gencoach.service.coaching.lifecycle`. The table, for users: docs/coaching.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

from gencoach.protocol import CoachingProposal
from gencoach.protocol.jobs import Diagnosis, JobName
from gencoach.service.coaching.lifecycle import (
    FAILED,
    IN_FLIGHT,
    RUNNING,
    TERMINAL,
    TRANSITIONS,
    RequestState,
)

if TYPE_CHECKING:
    from gencoach.service.coaching.requests import CoachingRequest, JobRecord

SlotPart = Literal["", "admit", "renew", "release", "prove", "complete"]
"""What the stage limits do in the step that stores a decision: nothing, take (or renew)
the request's pending slot, renew it for the worker that took its job (refused when it
lapsed or went), give it back, count an attempt proven, or turn the slots of recorded
branches into completed attempts."""


# --- Events: what happened ---------------------------------------------------------------


@dataclass(frozen=True)
class Refused:
    """The router, or the stage limits, refused an opportunity."""

    reason: str


@dataclass(frozen=True)
class Admitted:
    """The stage limits admitted an opportunity, whose first job is `job`."""

    job: JobName


@dataclass(frozen=True)
class PersonDecided:
    """A person gave the decision of a request they opened (an intervention)."""


@dataclass(frozen=True)
class JobTaken:
    """A worker took the request's job, and holds its slot for `lease_s` from now on (it
    reports this in the call that first renews the slot, before any work)."""

    job: JobName
    attempt: int
    lease_s: float


@dataclass(frozen=True)
class JobAnswered:
    """A worker's result for the request's job (status as the result has it)."""

    job: JobName
    attempt: int
    record: JobRecord
    tokens: int
    status: str
    reason: str | None = None
    diagnosis: Diagnosis | None = None
    proposals: tuple[CoachingProposal, ...] = ()
    rewrite: str | None = None
    offered_points: tuple[str, ...] = ()
    """For a diagnosis: the reinjection points its repair job will offer."""


@dataclass(frozen=True)
class WorkerLost:
    """The job's holder is gone (its lease lapsed, its worker died, its job vanished);
    `retry` is False when its job cannot be built again (the run's graph is gone)."""

    reason: str
    retry: bool = True


@dataclass(frozen=True)
class BranchesRecorded:
    """The reinjection ended: the attempts of the branches it recorded (none when every
    proposal failed), the reinjection point of each, and why any proposal failed."""

    attempt_ids: tuple[int, ...]
    points: tuple[str, ...] = ()
    reason: str | None = None


@dataclass(frozen=True)
class Unbranchable:
    """The correction cannot be reinjected at all (the run is over, its graph is gone)."""

    reason: str
    error: bool = False


@dataclass(frozen=True)
class CandidateExecuted:
    """The generator executed a branch of the request."""


@dataclass(frozen=True)
class StageEnded:
    """A trajectory through one of the request's attempts ended its stage."""

    attempt: int
    success: bool
    event: str


@dataclass(frozen=True)
class RunEnded:
    """The request's run finished: nothing more will happen to it."""


Event = (
    Refused
    | Admitted
    | PersonDecided
    | JobTaken
    | JobAnswered
    | WorkerLost
    | BranchesRecorded
    | Unbranchable
    | CandidateExecuted
    | StageEnded
    | RunEnded
)


# --- Effects: what to carry out once the decision is stored ------------------------------


@dataclass(frozen=True)
class Dispatch:
    """Queue the request's job (`request.job`, `request.attempt`) for a worker."""


@dataclass(frozen=True)
class Reinject:
    """Reinject the request's proposals through its run's agent."""


Effect = Dispatch | Reinject


@dataclass(frozen=True)
class Decision:
    """The request's next version, the limits' part of storing it, and what to do after."""

    request: CoachingRequest
    slot: SlotPart = ""
    effects: tuple[Effect, ...] = ()
    proven_attempt: int | None = None
    lease_s: float = 0.0
    """For `renew`: the lease the worker holds the slot for."""
    completions: tuple[tuple[str, int], ...] = ()
    """For `complete`: each recorded branch's slot and attempt. The first branch turns the
    request's pending slot into its completed attempt; any further one is an attempt of
    its own (slot `request id|point`)."""


@dataclass(frozen=True)
class Refusal:
    """Why the event does not apply to the request as it stands (nothing changes)."""

    reason: str


_OPEN: Final = frozenset(TRANSITIONS) - TERMINAL
EVENT_TABLE: Final[dict[str, frozenset[RequestState]]] = {
    "Refused": frozenset({"opportunity"}),
    "Admitted": frozenset({"opportunity"}),
    "PersonDecided": frozenset({"opportunity"}),
    "JobTaken": frozenset({"queued"}),
    "JobAnswered": frozenset({"queued", *RUNNING.values()}),
    "WorkerLost": IN_FLIGHT,
    "BranchesRecorded": frozenset({"corrected"}),
    "Unbranchable": frozenset({"corrected"}),
    "CandidateExecuted": frozenset({"reinjected"}),
    "StageEnded": frozenset({"reinjected", "executed"}),
    "RunEnded": _OPEN,
}
"""The states each event may apply in (its own content decides the rest: the job and
attempt a result answers, the attempt a stage end proves); in any other, `decide`
refuses it. docs/coaching.md's "Events" table shows the same (a test keeps the two the
same)."""


def decide(request: CoachingRequest, event: Event) -> Decision | Refusal:
    """The request's next version and effects for `event`, or why it does not apply.

    It never raises and reads nothing: the event carries every fact it needs.
    `RequestStore.apply` stores the decision in one script call, with the stage limits'
    part of it (`slot`); the caller then carries out the other effects (`Dispatch`,
    `Reinject`).
    """
    state = request.state
    if state in TERMINAL:
        return Refusal(f"the request has ended ({state})")
    match event:
        case Refused(reason):
            if state != "opportunity":
                return _not_in(event, state)
            return _end(request, "skipped", reason)
        case Admitted(job):
            if state != "opportunity":
                return _not_in(event, state)
            queued = _queued(request.moved("admitted"), job)
            return Decision(queued, "admit", (Dispatch(),))
        case PersonDecided():
            if state != "opportunity" or not request.human or not request.proposals:
                return _not_in(event, state, "a person's request carrying their decision")
            admitted = request.moved("admitted", "a person's intervention, outside the limits")
            corrected = admitted.moved("corrected", "a person gave the decision")
            return Decision(corrected, "admit", (Reinject(),))
        case JobTaken(job, attempt, lease_s):
            if state != "queued" or request.job != job or request.attempt != attempt:
                return _not_in(event, state, f"it waits for its {request.job} job")
            running = request.moved(RUNNING[job], "a worker took the job")
            return Decision(running, "renew", lease_s=lease_s)
        case JobAnswered():
            return _answered(request, event)
        case WorkerLost(reason, retry):
            return _lost(request, reason, retry)
        case BranchesRecorded(attempt_ids, points, reason):
            if state != "corrected":
                return _not_in(event, state)
            if not attempt_ids:
                return _end(request, "abandoned", reason or "no proposal to reinject")
            if len(points) != len(attempt_ids):
                return Refusal("each recorded branch needs its reinjection point")
            moved = request.moved("reinjected", reason, attempt_ids=list(attempt_ids))
            slots = [request.request_id, *(f"{request.request_id}|{p}" for p in points[1:])]
            return Decision(
                moved, "complete", completions=tuple(zip(slots, attempt_ids, strict=True))
            )
        case Unbranchable(reason, error):
            if state != "corrected":
                return _not_in(event, state)
            return _end(request, "error" if error else "abandoned", reason)
        case CandidateExecuted():
            if state != "reinjected":
                return _not_in(event, state)
            return Decision(request.moved("executed"))
        case StageEnded(attempt, success, ended_in):
            return _stage_ended(request, attempt, success, ended_in)
        case RunEnded():
            return _run_ended(request)
    return Refusal(f"{type(event).__name__} is not an event of a request")


def _answered(request: CoachingRequest, event: JobAnswered) -> Decision | Refusal:
    state = request.state
    waiting = state == "queued" and request.job == event.job
    if not (waiting or state == RUNNING[event.job]) or request.attempt != event.attempt:
        return _not_in(event, state, f"it does not wait for attempt {event.attempt}")
    request = request.model_copy(
        update={"jobs": [*request.jobs, event.record], "tokens": request.tokens + event.tokens}
    )
    if event.status in FAILED:
        default = "nothing to correct" if event.status == "declined" else event.status
        return _end(request, event.status, event.reason or default)
    if event.job == "diagnosis" and event.diagnosis is not None:
        queued = _queued(
            request,
            "repair",
            f"diagnosed step {event.diagnosis.step_id}",
            diagnosis=event.diagnosis,
            offered_points=list(event.offered_points),
        )
        return Decision(queued, "", (Dispatch(),))
    if event.job in ("rewrite", "repair") and event.status == "corrected" and event.proposals:
        corrected = request.moved(
            "corrected", None, proposals=list(event.proposals), rewrite=event.rewrite
        )
        return Decision(corrected, "", (Reinject(),))
    return _end(request, "error", f"the {event.job} job answered {event.status} with nothing")


def _lost(request: CoachingRequest, reason: str, retry: bool) -> Decision | Refusal:
    if request.state not in IN_FLIGHT:
        return _not_in(WorkerLost(reason), request.state)
    if not retry:
        return _end(request, "abandoned", reason)
    if request.attempt >= request.max_attempts:
        tries = "1 attempt" if request.attempt == 1 else f"{request.attempt} attempts"
        return _end(request, "abandoned", f"{reason}; gave up after {tries}")
    job = _job_in_hand(request)
    retried = _queued(request, job, f"retry: {reason}", attempt=request.attempt + 1)
    return Decision(retried, "admit", (Dispatch(),))


def _stage_ended(
    request: CoachingRequest, attempt: int, success: bool, ended_in: str
) -> Decision | Refusal:
    state = request.state
    if state not in ("reinjected", "executed") or attempt not in request.attempt_ids:
        return _not_in(StageEnded(attempt, success, ended_in), state)
    executed = request.moved("executed") if state == "reinjected" else request
    if success:
        return Decision(executed.moved("proven", f"attempt {attempt}"), "prove", (), attempt)
    # Another trajectory of the branch may still succeed: the request stays executed,
    # noting why, until its run ends.
    reason = f"attempt {attempt}: a trajectory ended in {ended_in}"
    return Decision(executed.model_copy(update={"reason": reason}))


def _run_ended(request: CoachingRequest) -> Decision:
    state = request.state
    if state in IN_FLIGHT:
        return _end(request, "abandoned", f"the run finished while the request was {state}")
    if state == "opportunity":
        return _end(request, "skipped", "the run finished before the opportunity was routed")
    if state == "corrected":
        return _end(request, "abandoned", "the run finished before the correction was reinjected")
    if state == "reinjected":
        return _end(request, "abandoned", "the run finished before the branch was executed")
    # Executed: the one place a request becomes unproven, when nothing can prove it any more.
    if request.reason:  # a trajectory of the branch failed (`StageEnded`)
        why = f"{request.reason}; the run finished with none of them proven"
        return _end(request, "unproven", why)
    return _end(
        request, "unproven", "the run finished before the branch reached the end of its stage"
    )


def _job_in_hand(request: CoachingRequest) -> JobName:
    if request.state == "queued" and request.job is not None:
        return request.job
    running = [job for job, state in RUNNING.items() if state == request.state]
    return running[0] if running else (request.job or "diagnosis")


def _queued(
    request: CoachingRequest, job: JobName, reason: str | None = None, **changes: object
) -> CoachingRequest:
    """The request waiting for a worker to take its `job`."""
    return request.moved(
        "queued", reason or f"the {job} job waits for a worker", job=job, **changes
    )


def _end(request: CoachingRequest, state: RequestState, reason: str) -> Decision:
    """An end: the request's slot goes back in the same step (an opportunity holds none)."""
    slot: SlotPart = "" if request.state == "opportunity" else "release"
    return Decision(request.moved(state, reason), slot)


def _not_in(event: Event, state: RequestState, detail: str = "") -> Refusal:
    why = f"{type(event).__name__} does not apply to a request {state}"
    return Refusal(f"{why}: {detail}" if detail else why)
