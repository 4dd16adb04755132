"""Per-stage limits on a real Redis: admission, leases, completion, proof and the budgets view."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
import redis
from redis.asyncio import Redis
from redis.crc import key_slot

from gencoach.config import Limits
from gencoach.constants import Keys
from gencoach.limits import Admission, StageBudget, StageLimits

pytestmark = pytest.mark.asyncio

RUN, STAGE = "run-1", 3
# A short lease is only ever given to a lease the test means to see lapse; every check
# that needs a live lease runs on a long one (a loaded machine can stall a test for seconds).
LONG_S, LATER_S, SHORT_S = 30.0, 300.0, 0.2


def _limits(pending: int = 5, unproven: int = 5) -> Limits:
    return Limits(max_pending_per_stage=pending, max_unproven_per_stage=unproven)


@pytest_asyncio.fixture
async def limits(redis_url: str, redis_client: redis.Redis) -> AsyncIterator[StageLimits]:
    """Stage limits on the flushed test database."""
    client = Redis.from_url(redis_url)
    yield StageLimits(client, Keys())
    await client.aclose()


async def _admit(
    limits: StageLimits, request_id: str, budget: Limits, lease_s: float = LONG_S
) -> Admission:
    return await limits.admit(RUN, STAGE, request_id, budget, lease_s)


def _expiry_ms(limits: StageLimits, client: redis.Redis, request_id: str) -> int:
    """The expiry of the request's automatic lease as stored in Redis (ms since the epoch)."""
    score = client.zscore(limits.stage_keys(RUN, STAGE)[0], request_id)
    assert score is not None, f"{request_id} holds no automatic lease"
    return int(score)


def _server_ms(client: redis.Redis) -> int:
    """Redis's clock (TIME), the one the scripts read, in ms since the epoch."""
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


async def test_admits_until_pending_reaches_the_limit(limits: StageLimits) -> None:
    """Two automatic requests fill a limit of two pending; the third is refused with counts."""
    budget = _limits(pending=2)
    assert (await _admit(limits, "r1", budget)).outcome == "admitted"
    second = await _admit(limits, "r2", budget)
    assert second.admitted
    assert second.counts.pending == 2
    third = await _admit(limits, "r3", budget)
    assert third.outcome == "refused"
    assert third.refused_by == "pending"
    assert third.reason == "pending 2 of 2"
    assert (await limits.counts(RUN, STAGE)).pending == 2


async def test_completed_attempts_count_as_unproven_until_proven(limits: StageLimits) -> None:
    """A completed, unproven attempt holds an unproven slot; its proof frees it."""
    budget = _limits(pending=5, unproven=2)
    await _admit(limits, "r1", budget)
    assert await limits.complete(RUN, STAGE, "r1", 1) == "completed"
    assert (await _admit(limits, "r2", budget)).admitted
    refused = await _admit(limits, "r3", budget)
    assert (refused.refused_by, refused.reason) == ("unproven", "unproven 2 of 2")
    assert await limits.prove(RUN, STAGE, 1)
    admitted = await _admit(limits, "r3", budget)
    assert admitted.outcome == "admitted"
    assert admitted.counts.unproven == 2


async def test_admitting_twice_renews_the_lease_and_takes_one_slot(
    limits: StageLimits, redis_client: redis.Redis
) -> None:
    """A repeated admission answers renewed, sets the lease's expiry to its own term from
    now and keeps pending at one."""
    budget = _limits(pending=1)
    await _admit(limits, "r1", budget)
    first = _expiry_ms(limits, redis_client, "r1")
    before = _server_ms(redis_client)
    again = await _admit(limits, "r1", budget, lease_s=LATER_S)
    after = _server_ms(redis_client)
    assert (again.outcome, again.admitted, again.counts.pending) == ("renewed", True, 1)
    renewed = _expiry_ms(limits, redis_client, "r1")
    assert before + LATER_S * 1000 <= renewed <= after + LATER_S * 1000
    assert renewed > first


async def test_releasing_twice_is_harmless(limits: StageLimits) -> None:
    """Release frees the slot once; a second release changes nothing."""
    budget = _limits(pending=1)
    await _admit(limits, "r1", budget)
    assert await limits.release(RUN, STAGE, "r1") is True
    assert await limits.lease_alive(RUN, STAGE, "r1") is False
    assert await limits.release(RUN, STAGE, "r1") is False
    assert await limits.release(RUN, STAGE, "never-admitted") is False
    assert (await _admit(limits, "r2", budget)).admitted
    counts = await limits.counts(RUN, STAGE)
    assert (counts.pending, counts.completed) == (1, 0)


async def test_completing_twice_records_one_attempt(limits: StageLimits) -> None:
    """The lease becomes one completed attempt; the same completion again is a duplicate."""
    await _admit(limits, "r1", _limits())
    assert await limits.complete(RUN, STAGE, "r1", 7) == "completed"
    assert await limits.complete(RUN, STAGE, "r1", 7) == "duplicate"
    counts = await limits.counts(RUN, STAGE)
    assert (counts.pending, counts.completed, counts.unproven) == (0, 1, 1)


async def test_conflicting_completions_are_refused_and_write_nothing(limits: StageLimits) -> None:
    """A request completes as one attempt only, and an attempt belongs to one request."""
    await _admit(limits, "r1", _limits())
    await _admit(limits, "r2", _limits())
    await limits.complete(RUN, STAGE, "r1", 7)
    with pytest.raises(ValueError, match="already completed as attempt 7"):
        await limits.complete(RUN, STAGE, "r1", 8)
    with pytest.raises(ValueError, match="attempt 7 already completed another request"):
        await limits.complete(RUN, STAGE, "r2", 7)
    counts = await limits.counts(RUN, STAGE)
    assert (counts.pending, counts.completed) == (1, 1)


async def test_a_completed_request_is_not_admitted_again(limits: StageLimits) -> None:
    """Admitting a request that already produced an attempt is refused, naming the attempt."""
    await _admit(limits, "r1", _limits())
    await limits.complete(RUN, STAGE, "r1", 4)
    again = await _admit(limits, "r1", _limits())
    assert (again.refused_by, again.attempt_id) == ("completed", 4)
    assert again.reason == "already completed as attempt 4"
    assert again.counts.pending == 0


async def test_completion_after_the_lease_expired_still_records_the_attempt(
    limits: StageLimits,
) -> None:
    """A late completion is reported as late and its branch counts as a completed attempt."""
    await _admit(limits, "r1", _limits(), lease_s=SHORT_S)
    await asyncio.sleep(SHORT_S + 0.1)
    assert await limits.complete(RUN, STAGE, "r1", 1) == "late"
    counts = await limits.counts(RUN, STAGE)
    assert (counts.pending, counts.completed, counts.unproven) == (0, 1, 1)


async def test_proof_counts_once_and_only_for_completed_attempts(limits: StageLimits) -> None:
    """Proving an unknown attempt records nothing; a completed one is proven exactly once."""
    assert await limits.prove(RUN, STAGE, 1) is False
    await _admit(limits, "r1", _limits())
    await limits.complete(RUN, STAGE, "r1", 1)
    assert await limits.prove(RUN, STAGE, 1) is True
    assert await limits.prove(RUN, STAGE, 1) is False
    counts = await limits.counts(RUN, STAGE)
    assert (counts.completed, counts.proven, counts.unproven) == (1, 1, 0)


async def test_an_expired_lease_frees_its_slot(limits: StageLimits) -> None:
    """Once a lease lapses unrenewed, its slot goes to the next request and renewing fails."""
    budget = _limits(pending=1)
    await _admit(limits, "r1", budget)
    assert (await _admit(limits, "r2", budget)).refused_by == "pending"
    assert await limits.lease_alive(RUN, STAGE, "r1") is True
    # Shortened only now: however slow the machine, the checks above ran on a live lease.
    assert await limits.renew(RUN, STAGE, "r1", SHORT_S) is True
    await asyncio.sleep(SHORT_S + 0.1)
    assert await limits.lease_alive(RUN, STAGE, "r1") is False
    assert (await limits.counts(RUN, STAGE)).pending == 0
    assert (await _admit(limits, "r2", budget)).admitted
    assert await limits.renew(RUN, STAGE, "r1", LONG_S) is False


async def test_a_failed_renewal_says_whether_the_lease_lapsed_or_was_taken(
    limits: StageLimits,
) -> None:
    """`expired`: it lapsed before this renewal (which drops it); `absent`: released,
    reclaimed by another admission, or never there."""
    budget = _limits(pending=2)
    await _admit(limits, "r1", budget, lease_s=SHORT_S)
    await _admit(limits, "r2", budget, lease_s=SHORT_S)
    await asyncio.sleep(SHORT_S + 0.1)
    assert await limits.renewal(RUN, STAGE, "r1", LONG_S) == "expired"
    assert await limits.renewal(RUN, STAGE, "r1", LONG_S) == "absent"
    await _admit(limits, "r3", _limits(pending=1))  # reclaims r2's lapsed slot
    assert await limits.renewal(RUN, STAGE, "r2", LONG_S) == "absent"
    await limits.release(RUN, STAGE, "r3")
    assert await limits.renewal(RUN, STAGE, "r3", LONG_S) == "absent"


async def test_renewing_keeps_a_lease_alive(limits: StageLimits, redis_client: redis.Redis) -> None:
    """A renewal moves a live lease's expiry to its new term from the server's now, past
    the first term's end; renewing a lease nobody holds fails."""
    await _admit(limits, "r1", _limits())
    first = _expiry_ms(limits, redis_client, "r1")
    before = _server_ms(redis_client)
    assert await limits.renew(RUN, STAGE, "r1", LATER_S) is True
    after = _server_ms(redis_client)
    renewed = _expiry_ms(limits, redis_client, "r1")
    assert before + LATER_S * 1000 <= renewed <= after + LATER_S * 1000
    assert renewed > first
    assert (await limits.counts(RUN, STAGE)).pending == 1
    assert await limits.renew(RUN, STAGE, "unknown", SHORT_S) is False


async def test_changed_limits_apply_to_the_next_admission(limits: StageLimits) -> None:
    """Raising the limit admits the next request; lowering it refuses the next one."""
    await _admit(limits, "r1", _limits(pending=2))
    await _admit(limits, "r2", _limits(pending=2))
    assert not (await _admit(limits, "r3", _limits(pending=2))).admitted
    assert (await _admit(limits, "r3", _limits(pending=3))).admitted
    lowered = await _admit(limits, "r4", _limits(pending=1))
    assert lowered.reason == "pending 3 of 1"


async def test_human_interventions_are_exempt_but_counted(limits: StageLimits) -> None:
    """A human request is admitted over full limits, shows as pending and blocks automatic ones."""
    budget = _limits(pending=1, unproven=1)
    await _admit(limits, "auto-1", budget)
    human = await limits.admit(RUN, STAGE, "human-1", budget, LONG_S, human=True)
    assert human.outcome == "admitted"
    assert (human.counts.pending, human.counts.human_pending) == (2, 1)
    await limits.release(RUN, STAGE, "auto-1")
    assert (await _admit(limits, "auto-2", budget)).refused_by == "pending"
    assert await limits.complete(RUN, STAGE, "human-1", 9) == "completed"
    counts = await limits.counts(RUN, STAGE)
    assert (counts.pending, counts.human_pending, counts.unproven) == (0, 0, 1)


async def test_admission_survives_a_script_flush(
    limits: StageLimits, redis_client: redis.Redis
) -> None:
    """After SCRIPT FLUSH the scripts are loaded again, for single calls and pipelines."""
    await _admit(limits, "r1", _limits())
    redis_client.script_flush()
    assert (await _admit(limits, "r2", _limits())).counts.pending == 2
    redis_client.script_flush()
    assert [budget.pending for budget in await limits.stage_budgets(RUN, _limits())] == [2]


async def test_stage_budgets_list_each_stage_with_the_limits(limits: StageLimits) -> None:
    """Every stage of the run appears once, by id, with its counts and the limits passed in."""
    await limits.admit(RUN, 5, "a", _limits(), LONG_S)
    await limits.admit(RUN, 5, "b", _limits(), LONG_S)
    await limits.complete(RUN, 5, "b", 1)
    await limits.prove(RUN, 5, 1)
    await limits.admit(RUN, 2, "c", _limits(), LONG_S, human=True)
    budgets = await limits.stage_budgets(RUN, _limits(pending=4, unproven=6))
    assert budgets == [
        StageBudget(
            stage_id=2, pending=1, human_pending=1, completed=0, proven=0, unproven=1,
            max_pending=4, max_unproven=6,
        ),
        StageBudget(
            stage_id=5, pending=1, human_pending=0, completed=1, proven=1, unproven=1,
            max_pending=4, max_unproven=6,
        ),
    ]  # fmt: skip
    assert await limits.stage_budgets("other-run", _limits()) == []
    assert len(await limits.run_keys(RUN)) == 11


async def test_keys_of_a_stage_share_the_run_hash_slot(limits: StageLimits) -> None:
    """Every key a script touches lies in the run's Redis Cluster slot, beside its graph."""
    slot = key_slot(Keys().run(RUN, "meta").encode())
    keys = limits.stage_keys(RUN, STAGE)
    assert len(set(keys)) == 6
    assert {key_slot(key.encode()) for key in keys} == {slot}


async def test_invalid_arguments_are_refused_before_any_write(
    limits: StageLimits, redis_client: redis.Redis
) -> None:
    """Bad arguments raise in Python, and the scripts refuse them too without writing."""
    for bad in (
        limits.admit("run{1}", STAGE, "r1", _limits(), LONG_S),
        limits.admit(RUN, -1, "r1", _limits(), LONG_S),
        limits.admit(RUN, STAGE, "", _limits(), LONG_S),
        limits.admit(RUN, STAGE, "r1", _limits(), 0.0),
        limits.complete(RUN, STAGE, "r1", -2),
    ):
        with pytest.raises(ValueError, match="must"):
            await bad
    script = redis_client.register_script(
        limits._admit.script  # the same text the service runs
    )
    keys = limits.stage_keys(RUN, STAGE)
    cases: list[list[str | int]] = [
        ["r1", 0, 5, 5, 0, STAGE], ["r1", 100, 5, "x", 0, STAGE], ["", 100, 5, 5, 0, 1]
    ]  # fmt: skip
    for args in cases:
        with pytest.raises(redis.ResponseError, match="must"):
            script(keys=keys, args=args)
    assert redis_client.dbsize() == 0
