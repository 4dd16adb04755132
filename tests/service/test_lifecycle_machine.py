"""A hypothesis state machine: writers holding copies of requests, some stale, report
events about them on a real Redis, one after the other and two at once. Each event is
decided on the request as stored (a stale copy changes nothing by itself); the records,
the funnel's counts and the stage limits always match a plain model, so no transition
is lost or counted twice and no slot leaks."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from redis.asyncio import Redis

from gencoach.config import Limits
from gencoach.constants import Keys
from gencoach.limits import StageLimits
from gencoach.metrics import MetricsRecorder
from gencoach.metrics.catalog import REQUESTS as ARRIVALS
from gencoach.protocol import CoachingProposal
from gencoach.protocol.jobs import Diagnosis, JobName
from gencoach.service.coaching.decider import (
    Admitted,
    BranchesRecorded,
    CandidateExecuted,
    Decision,
    Event,
    JobAnswered,
    JobTaken,
    Refused,
    RunEnded,
    StageEnded,
    Unbranchable,
    WorkerLost,
    decide,
)
from gencoach.service.coaching.lifecycle import IN_FLIGHT, RequestState
from gencoach.service.coaching.requests import (
    AdmissionTerms,
    Applied,
    CoachingRequest,
    JobRecord,
    RequestStore,
)

T = TypeVar("T")
LIMITS = Limits(max_pending_per_stage=3, max_unproven_per_stage=6)
LEASE_S = 600.0
TERMS = AdmissionTerms(LIMITS, LEASE_S)
JOBS: tuple[JobName, ...] = ("diagnosis", "repair", "rewrite")
ANSWERS = ("done", "corrected", "declined", "abandoned", "error")
PROPOSAL = CoachingProposal(
    reinjection_point_id="replacement", extra_keys={"kind": "replace_say", "text": "42"}
)
CANDIDATES = st.integers(0, 2)
WRITERS = st.integers(0, 1)
HOLDING: frozenset[RequestState] = IN_FLIGHT | {"corrected"}
# States whose request turned its slot into a completed attempt on the way.
COMPLETED: frozenset[RequestState] = frozenset({"reinjected", "executed", "proven", "unproven"})


class LifecycleMachine(RuleBasedStateMachine):
    redis_url = ""

    def __init__(self) -> None:
        super().__init__()
        self.runner = asyncio.Runner()
        self.client = Redis.from_url(self.redis_url)
        self.metrics = MetricsRecorder()
        self.requests = RequestStore(self.client, Keys(), self.metrics)
        self.limits = StageLimits(self.client, Keys())
        self.run_id = uuid.uuid4().hex
        self.stored: dict[int, CoachingRequest] = {}  # the model: what Redis must hold
        self.copies: dict[tuple[int, int], CoachingRequest] = {}  # (writer, candidate)
        self.completed_by: dict[int, int] = {}  # candidate -> attempt id, once reinjected

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.runner.run(coroutine)

    def teardown(self) -> None:
        self._run(self.client.aclose())
        self.runner.close()

    def _request(self, candidate: int) -> CoachingRequest:
        return CoachingRequest(
            request_id=f"{self.run_id}:{candidate}:failure",
            run_id=self.run_id,
            route="failure",
            kind="failure",
            type_coaching="failure:decision",
            candidate_id=candidate,
            candidate_gen_id=f"c{candidate}",
            stage_id=0,
            state="opportunity",
        ).moved("opportunity")

    def open(self, candidate: int) -> None:
        request = self._request(candidate)
        created = self._run(self.requests.create(request))
        assert created == (candidate not in self.stored)
        self.stored.setdefault(candidate, request)

    @rule(writer=WRITERS, candidate=CANDIDATES)
    def read(self, writer: int, candidate: int) -> None:
        found = self._run(self.requests.get(self.run_id, self._request(candidate).request_id))
        assert found == self.stored.get(candidate)
        if found is not None:
            self.copies[writer, candidate] = found

    def _event(self, data: st.DataObject, candidate: int) -> Event:
        job = data.draw(st.sampled_from(JOBS))
        attempt = data.draw(st.integers(1, 2))
        choices: list[Event] = [
            Refused("not coached"),
            Admitted(job),
            JobTaken(job, attempt, 30.0),
            _answered(job, attempt, data.draw(st.sampled_from(ANSWERS))),
            WorkerLost("the lease lapsed"),
            BranchesRecorded((100 + candidate,), ("replacement",)),
            BranchesRecorded(()),
            Unbranchable("the run is saved"),
            CandidateExecuted(),
            StageEnded(100 + candidate, data.draw(st.booleans()), "success"),
            RunEnded(),
        ]
        return data.draw(st.sampled_from(choices))

    def _expect(self, candidate: int, event: Event) -> RequestState | None:
        """The state the model says the event leads to, None when it is refused."""
        decided = decide(self.stored[candidate], event)
        return decided.request.state if isinstance(decided, Decision) else None

    @rule(writer=WRITERS, candidate=CANDIDATES, data=st.data())
    def report(self, writer: int, candidate: int, data: st.DataObject) -> None:
        """A writer reports an event from its copy, fresh or stale: it is decided on the
        request as stored, whatever the copy said."""
        if candidate not in self.stored:
            self.open(candidate)
        copy = self.copies.setdefault((writer, candidate), self.stored[candidate])
        event = self._event(data, candidate)
        expected = self._expect(candidate, event)
        applied = self._run(self.requests.apply(copy, event, TERMS))
        if applied.stored:
            assert applied.request.state == expected
            self.stored[candidate] = applied.request
            assert applied.decision is not None
            for _, attempt in applied.decision.completions:  # the branches' slots
                self.completed_by[candidate] = attempt
        else:
            refused_by_limits = applied.admission is not None and not applied.admission.admitted
            assert expected is None or refused_by_limits, (event, expected, applied.refusal)
        self.copies[writer, candidate] = applied.request

    @rule(candidate=CANDIDATES, data=st.data())
    def report_at_once(self, candidate: int, data: st.DataObject) -> None:
        """Two writers report events on the same request concurrently: the stored request
        is what one order of the two gives, never a mix or a lost write."""
        if candidate not in self.stored:
            self.open(candidate)
        before = self.stored[candidate]
        first, second = self._event(data, candidate), self._event(data, candidate)

        async def both() -> list[Applied]:
            return list(
                await asyncio.gather(
                    self.requests.apply(before, first, TERMS),
                    self.requests.apply(before, second, TERMS),
                )
            )

        applied = self._run(both())
        found = self._run(self.requests.get(self.run_id, before.request_id))
        assert found is not None
        orders = [_states_after(before, (first, second)), _states_after(before, (second, first))]
        stored = [step.state for step in found.history]
        assert any(stored in order for order in orders), (first, second, stored, orders)
        assert sum(a.stored for a in applied) <= 2
        for done in applied:
            for _, attempt in done.decision.completions if done.decision else ():
                self.completed_by[candidate] = attempt
        self.stored[candidate] = found
        for writer in (0, 1):
            self.copies[writer, candidate] = found

    @invariant()
    def records_and_counts_match_the_model(self) -> None:
        for request in self.stored.values():
            found = self._run(self.requests.get(self.run_id, request.request_id))
            assert found == request
        arrived = Counter(step.state for r in self.stored.values() for step in r.history)
        counted = {
            labels[1]: value
            for (name, labels), value in self.metrics.pending().items()
            if name == ARRIVALS.name
        }
        assert counted == dict(arrived)

    @invariant()
    def the_limits_hold_exactly_the_live_slots(self) -> None:
        counts = self._run(self.limits.counts(self.run_id, 0))
        states = [r.state for r in self.stored.values()]
        assert counts.pending == sum(state in HOLDING for state in states)
        assert counts.pending <= LIMITS.max_pending_per_stage
        assert counts.completed == len(self.completed_by)
        assert counts.proven == states.count("proven")


@pytest.mark.redis
def test_lifecycle_machine(redis_url: str) -> None:
    LifecycleMachine.redis_url = redis_url
    run_state_machine_as_test(
        LifecycleMachine,
        settings=settings(
            max_examples=40,
            stateful_step_count=80,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )


def _answered(job: JobName, attempt: int, status: str) -> JobAnswered:
    diagnosis = Diagnosis(step_id=1, decision_index=1, explanation="x")
    proposals = (PROPOSAL,) if status == "corrected" else ()
    return JobAnswered(
        job=job,
        attempt=attempt,
        record=JobRecord(job=job, attempt=attempt, status=status),
        tokens=1,
        status=status,
        reason=None if status in ("done", "corrected") else "why",
        diagnosis=diagnosis if job == "diagnosis" else None,
        proposals=proposals,
    )


def _states_after(before: CoachingRequest, events: tuple[Event, ...]) -> list[list[str]]:
    """The state histories the events may leave, applied in this order, each one stored
    or refused (by the limits too: an admission may be refused as a whole)."""
    outcomes = [before]
    for event in events:
        grown = []
        for request in outcomes:
            decided = decide(request, event)
            grown.append(request)
            if isinstance(decided, Decision):
                grown.append(decided.request)
        outcomes = grown
    return [[step.state for step in request.history] for request in outcomes]
