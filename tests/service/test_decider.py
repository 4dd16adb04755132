"""The decider as a pure table: every event in every state is decided or refused, never an
exception; every decision follows the lifecycle's state graph, gives a slot back exactly
when it ends a request that held one, and leaves the event's facts in the request."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

from hypothesis import given
from hypothesis import strategies as st

from gencoach.protocol import CoachingProposal
from gencoach.protocol.jobs import Diagnosis, JobName
from gencoach.service.coaching.decider import (
    EVENT_TABLE,
    Admitted,
    BranchesRecorded,
    CandidateExecuted,
    Decision,
    Dispatch,
    Event,
    JobAnswered,
    JobTaken,
    PersonDecided,
    Refusal,
    Refused,
    Reinject,
    RunEnded,
    StageEnded,
    Unbranchable,
    WorkerLost,
    decide,
)
from gencoach.service.coaching.lifecycle import (
    IN_FLIGHT,
    TERMINAL,
    TRANSITIONS,
    RequestState,
    check_path,
)
from gencoach.service.coaching.requests import CoachingRequest, JobRecord

STATES: tuple[RequestState, ...] = tuple(TRANSITIONS)
JOBS: tuple[JobName, ...] = get_args(JobName)
PROPOSAL = CoachingProposal(
    reinjection_point_id="replacement",
    extra_keys={"kind": "replace_say", "text": "42"},
)


def _request(
    state: RequestState, job: JobName | None, attempt: int, human: bool
) -> CoachingRequest:
    base = CoachingRequest(
        request_id="r:3:failure",
        run_id="r",
        route="failure",
        kind="failure",
        type_coaching="failure:decision",
        candidate_id=3,
        candidate_gen_id="c3",
        stage_id=0,
        human=human,
        state="opportunity",
        attempt=attempt,
        max_attempts=2,
        job=job,
        attempt_ids=[7] if state in ("reinjected", "executed") else [],
    ).moved("opportunity")
    return base if state == "opportunity" else base.moved(state, "drawn")


requests = st.builds(
    _request,
    st.sampled_from(STATES),
    st.sampled_from((None, *JOBS)),
    st.integers(1, 3),
    st.booleans(),
)


def _answered(job: JobName, attempt: int, status: str, diagnosed: bool) -> JobAnswered:
    record = JobRecord(job=job, attempt=attempt, status=status)
    diagnosis = Diagnosis(step_id=2, decision_index=1, explanation="x") if diagnosed else None
    return JobAnswered(
        job=job,
        attempt=attempt,
        record=record,
        tokens=5,
        status=status,
        diagnosis=diagnosis,
        proposals=(PROPOSAL,) if status == "corrected" else (),
        offered_points=("replacement",),
    )


jobs = st.sampled_from(JOBS)
attempts = st.integers(1, 3)
events: st.SearchStrategy[Event] = st.one_of(
    st.builds(Refused, st.just("not coached")),
    st.builds(Admitted, jobs),
    st.just(PersonDecided()),
    st.builds(JobTaken, jobs, attempts, st.floats(0.1, 60)),
    st.builds(
        _answered,
        jobs,
        attempts,
        st.sampled_from(("done", "corrected", "declined", "abandoned", "error")),
        st.booleans(),
    ),
    st.builds(WorkerLost, st.just("the lease lapsed"), st.booleans()),
    st.builds(
        BranchesRecorded,
        st.sampled_from(((), (7,), (7, 8))),
        st.sampled_from(((), ("replacement",), ("replacement", "recovery"))),
        st.none(),
    ),
    st.builds(Unbranchable, st.just("the run is saved"), st.booleans()),
    st.just(CandidateExecuted()),
    st.builds(StageEnded, st.sampled_from((7, 9)), st.booleans(), st.just("success")),
    st.just(RunEnded()),
)


@given(requests, events)
def test_every_event_in_every_state_is_decided_or_refused(
    request: CoachingRequest, event: Event
) -> None:
    """Never an exception; a decision follows the state graph, extends the history, and
    touches the slot only as its move allows."""
    decided = decide(request, event)
    assert isinstance(decided, Decision | Refusal)
    if isinstance(decided, Refusal):
        assert decided.reason
        return
    moved = decided.request
    added = decided.request.history[len(request.history) :]
    check_path(request.request_id, [request.state, *(step.state for step in added)])
    assert moved.history[: len(request.history)] == request.history
    assert moved.state == (moved.history[-1].state if moved.history else request.state)
    if moved.state == "proven":
        assert decided.slot == "prove"
    elif moved.state in TERMINAL:
        holds = request.state != "opportunity"
        assert decided.slot == ("release" if holds else "")
        assert decided.effects == ()
    if decided.slot == "admit":
        assert request.state == "opportunity" or request.state in IN_FLIGHT
    if decided.slot == "prove":
        assert moved.state == "proven"
        assert decided.proven_attempt in request.attempt_ids
    if decided.slot == "complete":
        assert moved.state == "reinjected"
        assert [attempt for _, attempt in decided.completions] == moved.attempt_ids
        assert decided.completions[0][0] == request.request_id
    if Dispatch() in decided.effects:
        assert moved.state == "queued"
        assert moved.job is not None
    if Reinject() in decided.effects:
        assert moved.state == "corrected"
        assert moved.proposals


@given(requests, events)
def test_a_terminal_request_refuses_every_event(request: CoachingRequest, event: Event) -> None:
    """Nothing leaves an end."""
    if request.state in TERMINAL:
        assert isinstance(decide(request, event), Refusal)


@given(requests)
def test_a_run_end_ends_every_open_request(request: CoachingRequest) -> None:
    """Whatever state a request is in, its run's end leaves it terminal, with a reason."""
    decided = decide(request, RunEnded())
    if request.state in TERMINAL:
        assert isinstance(decided, Refusal)
        return
    assert isinstance(decided, Decision)
    assert decided.request.state in TERMINAL
    assert decided.request.reason


def test_an_answer_is_kept_only_by_the_attempt_it_answers() -> None:
    """A late result of an earlier attempt is refused; the awaited one moves the request on,
    whether or not its start was seen (queued or running)."""
    queued = _request("queued", "diagnosis", 2, False)
    late = _answered("diagnosis", 1, "done", True)
    assert isinstance(decide(queued, late), Refusal)
    awaited = _answered("diagnosis", 2, "done", True)
    for request in (queued, _request("diagnosing", "diagnosis", 2, False)):
        decided = decide(request, awaited)
        assert isinstance(decided, Decision)
        assert (decided.request.state, decided.request.job) == ("queued", "repair")
        assert decided.request.offered_points == ["replacement"]
        assert (decided.request.tokens, len(decided.request.jobs)) == (5, 1)


def test_a_lost_worker_is_retried_until_max_attempts() -> None:
    """The first loss queues the job again with the next attempt and a slot to retake;
    the loss of the last attempt abandons the request, saying how many were tried."""
    first = decide(_request("diagnosing", "diagnosis", 1, False), WorkerLost("lease lapsed"))
    assert isinstance(first, Decision)
    assert (first.request.state, first.request.attempt, first.slot) == ("queued", 2, "admit")
    last = decide(_request("diagnosing", "diagnosis", 2, False), WorkerLost("lease lapsed"))
    assert isinstance(last, Decision)
    assert last.request.state == "abandoned"
    assert last.request.reason == "lease lapsed; gave up after 2 attempts"


@given(requests, events)
def test_an_event_applies_only_in_the_states_its_row_lists(
    request: CoachingRequest, event: Event
) -> None:
    """`EVENT_TABLE` says where each event may apply; anywhere else it is refused."""
    if request.state not in EVENT_TABLE[type(event).__name__]:
        assert isinstance(decide(request, event), Refusal)


def test_the_docs_show_the_event_table() -> None:
    """docs/coaching.md's "Events" table has a row for each event the decider takes,
    listing the states `EVENT_TABLE` gives it ("any open state": every non-terminal one)."""
    assert set(EVENT_TABLE) == {cls.__name__ for cls in get_args(Event)}
    docs = (Path(__file__).parents[2] / "docs" / "coaching.md").read_text(encoding="utf-8")
    section = docs.split("### Events\n", 1)[1].split("\n\n", 2)[1]
    shown: dict[str, set[str]] = {}
    for line in section.splitlines()[2:]:
        _, event, _, states, _, _ = line.split("|")
        (name,) = re.findall(r"`(\w+)`", event)
        listed = set(re.findall(r"`(\w+)`", states))
        shown[name] = set[str](TRANSITIONS) - TERMINAL if "any open state" in states else listed
    assert shown == {name: set(states) for name, states in EVENT_TABLE.items()}
