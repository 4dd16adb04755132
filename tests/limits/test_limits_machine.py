"""A hypothesis state machine drives the stage limits on a real Redis against a model."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest
import redis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)
from redis.asyncio import Redis

from gencoach.config import Limits
from gencoach.constants import Keys
from gencoach.limits import StageLimits

T = TypeVar("T")
STAGE = 0
LEASE_S = 60.0  # leases end in this machine only when a rule makes them lapse
REQUESTS = st.integers(0, 7).map(lambda n: f"r{n}")
ATTEMPTS = st.integers(0, 7)
HUMAN = st.sampled_from([False, False, False, True])  # mostly automatic requests


class LimitsMachine(RuleBasedStateMachine):
    """Every operation's answer and the stage's counts must match a plain Python model."""

    redis_url = ""

    def __init__(self) -> None:
        super().__init__()
        self.runner = asyncio.Runner()
        self.client = Redis.from_url(self.redis_url)
        self.limits = StageLimits(self.client, Keys())
        self.run_id = uuid.uuid4().hex
        self.budget = Limits()
        self.leases: dict[str, bool] = {}  # request id -> human
        self.attempts: dict[str, int] = {}  # request id -> attempt id
        self.proven: set[int] = set()
        self.over_allowed = False  # a human admission or a late completion happened

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.runner.run(coroutine)

    @property
    def unproven(self) -> int:
        return len(self.leases) + len(self.attempts) - len(self.proven)

    @initialize(pending=st.integers(1, 4), unproven=st.integers(1, 5))
    def set_limits(self, pending: int, unproven: int) -> None:
        self.budget = Limits(max_pending_per_stage=pending, max_unproven_per_stage=unproven)

    @rule(request=REQUESTS, human=HUMAN)
    def admit(self, request: str, human: bool) -> None:
        answer = self._run(
            self.limits.admit(self.run_id, STAGE, request, self.budget, LEASE_S, human=human)
        )
        if request in self.attempts:
            assert (answer.refused_by, answer.attempt_id) == ("completed", self.attempts[request])
        elif request in self.leases:
            assert answer.outcome == "renewed"
        elif not human and len(self.leases) >= self.budget.max_pending_per_stage:
            assert answer.refused_by == "pending"
        elif not human and self.unproven >= self.budget.max_unproven_per_stage:
            assert answer.refused_by == "unproven"
        else:
            assert answer.outcome == "admitted"
            self.leases[request] = human
            self.over_allowed |= human
        if answer.admitted and not human:
            # What the script saw right after admitting: within the limits.
            automatic = answer.counts.pending - answer.counts.human_pending
            assert automatic <= self.budget.max_pending_per_stage
            if not self.over_allowed:
                assert answer.counts.unproven <= self.budget.max_unproven_per_stage

    @rule(request=REQUESTS)
    def renew(self, request: str) -> None:
        renewed = self._run(self.limits.renew(self.run_id, STAGE, request, LEASE_S))
        assert renewed is (request in self.leases)

    @rule(request=REQUESTS)
    def lease_alive(self, request: str) -> None:
        alive = self._run(self.limits.lease_alive(self.run_id, STAGE, request))
        assert alive is (request in self.leases)

    @rule(request=REQUESTS)
    def release(self, request: str) -> None:
        released = self._run(self.limits.release(self.run_id, STAGE, request))
        assert released is (request in self.leases)
        self.leases.pop(request, None)

    @rule(request=REQUESTS)
    def expire(self, request: str) -> None:
        # The real mechanism: shorten the lease to 1 ms and let the server's clock pass it.
        self._run(self.limits.renew(self.run_id, STAGE, request, 0.001))
        time.sleep(0.005)
        self.leases.pop(request, None)

    @rule(request=REQUESTS, attempt=ATTEMPTS)
    def complete(self, request: str, attempt: int) -> None:
        call = self.limits.complete(self.run_id, STAGE, request, attempt)
        if self.attempts.get(request) == attempt:
            assert self._run(call) == "duplicate"
        elif request in self.attempts or attempt in self.attempts.values():
            with pytest.raises(ValueError, match="already completed"):
                self._run(call)
        else:
            expected = "completed" if request in self.leases else "late"
            assert self._run(call) == expected
            self.over_allowed |= expected == "late"
            self.leases.pop(request, None)
            self.attempts[request] = attempt

    @rule(attempt=ATTEMPTS)
    def prove(self, attempt: int) -> None:
        first = attempt in self.attempts.values() and attempt not in self.proven
        assert self._run(self.limits.prove(self.run_id, STAGE, attempt)) is first
        if first:
            self.proven.add(attempt)

    @invariant()
    def counts_match_the_model_and_the_limits(self) -> None:
        counts = self._run(self.limits.counts(self.run_id, STAGE))
        assert counts.pending == len(self.leases)
        assert counts.human_pending == sum(self.leases.values())
        assert (counts.completed, counts.proven) == (len(self.attempts), len(self.proven))
        assert min(counts.pending, counts.human_pending, counts.completed, counts.proven) >= 0
        assert 0 <= counts.unproven == self.unproven
        automatic = counts.pending - counts.human_pending
        assert automatic <= self.budget.max_pending_per_stage
        if not self.over_allowed:
            assert counts.unproven <= self.budget.max_unproven_per_stage

    def teardown(self) -> None:
        self._run(self.client.aclose())
        self.runner.close()


def test_limits_follow_the_model(redis_url: str, redis_client: redis.Redis) -> None:
    """Random admit/renew/release/expire/complete/prove sequences keep every invariant."""
    LimitsMachine.redis_url = redis_url
    run_state_machine_as_test(
        LimitsMachine,
        settings=settings(
            max_examples=30,
            stateful_step_count=30,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
