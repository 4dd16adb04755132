"""A hypothesis state machine: writers holding copies of requests, some stale, move them
through the lifecycle table on a real Redis. Only a move from the stored state wins; the
records, the funnel's counts and the stage limits always match a plain model, so no
transition is lost or counted twice and no slot leaks."""

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
from gencoach.service.coaching.lifecycle import IN_FLIGHT, TRANSITIONS, RequestState
from gencoach.service.coaching.requests import CoachingRequest, RequestStore

T = TypeVar("T")
LIMITS = Limits(max_pending_per_stage=3, max_unproven_per_stage=6)
LEASE_S = 600.0
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

    @rule(writer=WRITERS, candidate=CANDIDATES, data=st.data())
    def move(self, writer: int, candidate: int, data: st.DataObject) -> None:
        if candidate not in self.stored:
            self.open(candidate)
        copy = self.copies.setdefault((writer, candidate), self.stored[candidate])
        if not TRANSITIONS[copy.state]:
            return
        target = data.draw(st.sampled_from(sorted(TRANSITIONS[copy.state])))
        current = self.stored[candidate]
        fresh = copy.history == current.history and copy.attempt == current.attempt
        changes: dict[str, object] = {}
        if target == "queued" and data.draw(st.booleans()):  # a retry, else the next job
            changes["attempt"] = copy.attempt + 1
        moved = copy.moved(target, f"to {target}", **changes)
        if target == "admitted":  # with its first job, as the coach does
            moved = moved.moved("queued", job="diagnosis")
        if data.draw(st.integers(0, 9)) == 0:  # a note on the request, no transition
            moved, target = copy.model_copy(update={"reason": "a note"}), copy.state
        stored = self._move(copy, moved, candidate, fresh)
        if stored:
            assert fresh
            self.stored[candidate] = moved
        else:
            assert not fresh or target in ("admitted", "queued", "proven")  # refused by limits
        self.copies[writer, candidate] = moved if stored else copy

    def _move(
        self, copy: CoachingRequest, moved: CoachingRequest, candidate: int, fresh: bool
    ) -> bool:
        if len(moved.history) == len(copy.history):
            return self._run(self.requests.move(copy, moved))
        if moved.history[len(copy.history)].state in ("admitted", "queued"):
            admission = self._run(self.requests.admit(copy, moved, LIMITS, LEASE_S))
            if admission is None:
                return False
            if fresh and not admission.admitted:
                assert admission.refused_by in ("pending", "unproven"), admission
            return admission.admitted
        if moved.state == "reinjected":
            if fresh:  # the reinjector completes the slot into an attempt, then moves
                attempt = 100 + candidate
                self._run(self.limits.complete(self.run_id, 0, copy.request_id, attempt))
                self.completed_by[candidate] = attempt
            return self._run(self.requests.move(copy, moved))
        if moved.state == "proven":
            attempt = self.completed_by.get(candidate, 999)
            return self._run(self.requests.prove(copy, moved, attempt))
        return self._run(self.requests.move(copy, moved))

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
