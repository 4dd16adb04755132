"""The deadlines through which reconciliation finds silent and never-registered runs:
written in the round trip that applies a run's events, removed once the run ends (and
its end is in the runs index), and forgotten by a look only if nothing moved them since."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from gencoach.constants import Keys
from gencoach.service.store.graphstore import GraphStore
from gencoach.service.store.watches import FIRST_LOOK_S, LAPSE_S, now_ms
from tests.support.graphs import RUN_STARTED, known_events

KEYS = Keys()


@pytest.mark.asyncio
async def test_a_run_is_watched_from_its_first_event_until_its_end(
    store: GraphStore, async_redis: Redis
) -> None:
    """run.started puts the run in `heard` (scored now) and in `registrations` (a look a few
    seconds on); each event moves its `heard` score on; run.finished takes it out of
    `heard`, while its registration stays watched until that ends."""
    events = known_events("w", finished=True)
    before = now_ms()
    await store.apply(events[:1])
    started = await async_redis.zscore(KEYS.heard, "w")
    look = await async_redis.zscore(KEYS.registrations, "w")
    assert started is not None
    assert before <= started <= now_ms()
    assert look is not None
    assert look >= before + FIRST_LOOK_S * 1000

    await store.apply(events[1:-1])
    moved = await async_redis.zscore(KEYS.heard, "w")
    assert moved is not None
    assert moved >= started
    await store.apply(events[-1:])

    assert await async_redis.zscore(KEYS.heard, "w") is None
    assert await async_redis.zscore(KEYS.registrations, "w") == look
    assert await store.index.counts() == {"active": 0, "finished": 1, "saved": 0}


@pytest.mark.asyncio
async def test_a_redelivered_start_never_brings_its_registrations_look_closer(
    store: GraphStore, async_redis: Redis
) -> None:
    """A registration under way keeps its look `LAPSE_S` ahead; the start's re-delivery
    (a dup) leaves that look where it is."""
    started = known_events("again")[:1]
    await store.apply(started)
    await store.watches.registering(["again"])
    look = await async_redis.zscore(KEYS.registrations, "again")
    assert look is not None
    assert look >= now_ms() + (LAPSE_S - 1) * 1000

    await store.apply(started)

    assert await async_redis.zscore(KEYS.registrations, "again") == look


@pytest.mark.asyncio
async def test_a_due_registration_is_claimed_by_one_controller_only(
    store: GraphStore, async_redis: Redis
) -> None:
    """Two controllers' passes that read the same due registrations: the first claim takes
    them (and moves their look ahead), the second, with the scores it read, gets none."""
    await async_redis.zadd(KEYS.registrations, {"r1": 1_000, "r2": 1_000})
    due = await store.watches.unregistered(limit=10)
    other = await GraphStore(async_redis, KEYS).watches.unregistered(limit=10)

    assert await store.watches.claim_registrations(due) == ["r1", "r2"]
    assert await store.watches.claim_registrations(other) == []
    assert await store.watches.unregistered(limit=10) == []


@pytest.mark.asyncio
async def test_a_redelivered_run_finished_indexes_the_end_a_crash_left_out(
    store: GraphStore, async_redis: Redis
) -> None:
    """A controller that died between applying run.finished and writing the runs index
    (the index still says active, the run is still in `heard`) loses nothing: the event,
    re-delivered, is a duplicate that writes the end to the index, then stops the watch."""
    events = known_events("crashed", finished=True)
    await store.apply(events)
    # What the crash leaves: the run's own state finished, the index and `heard` not told.
    await async_redis.delete(*[key async for key in async_redis.scan_iter(f"{KEYS.prefix}:runs:*")])
    await store.index.applied([("crashed", "buttons", RUN_STARTED["agent_url"])], [])
    await async_redis.zadd(KEYS.heard, {"crashed": now_ms()})
    assert await store.index.counts() == {"active": 1, "finished": 0, "saved": 0}

    (again,) = await store.apply(events[-1:])

    assert again.outcome == "dup"
    assert await store.index.counts() == {"active": 0, "finished": 1, "saved": 0}
    assert await async_redis.zscore(KEYS.heard, "crashed") is None


@pytest.mark.asyncio
async def test_a_watch_is_forgotten_only_if_nothing_moved_it_since_it_came_due(
    store: GraphStore, async_redis: Redis
) -> None:
    """A look forgets the due runs it found not active, except one heard from in between
    (its score moved): an event that started it meanwhile keeps it watched."""
    await async_redis.zadd(KEYS.heard, {"gone": 1_000, "revived": 1_000})
    due = await store.watches.silent(idle_s=1, limit=10)
    assert due == [("gone", 1_000), ("revived", 1_000)]
    await store.apply(known_events("revived")[:1])  # its run.started arrives meanwhile

    assert await store.watches.forget_heard(due) == 1

    assert await async_redis.zscore(KEYS.heard, "gone") is None
    assert await async_redis.zscore(KEYS.heard, "revived") is not None


@pytest.mark.asyncio
async def test_a_pass_reads_at_most_its_limit_of_due_runs_and_none_not_due(
    store: GraphStore, async_redis: Redis
) -> None:
    """`silent` returns the runs heard from before the idle bound, longest silent first,
    at most `limit` of them; a run heard from since is not among them."""
    old = now_ms() - 60_000
    await async_redis.zadd(KEYS.heard, {f"quiet-{i}": old + i for i in range(5)})
    await async_redis.zadd(KEYS.heard, {"talking": now_ms()})

    due = await store.watches.silent(idle_s=30, limit=3)

    assert due == [(f"quiet-{i}", old + i) for i in range(3)]
