"""A run's events apply in seq order whatever order they arrive in: those after a gap
wait in Redis and apply when it fills, or without it once the wait times out."""

from __future__ import annotations

import random
from typing import Any, cast

import anyio
import pytest
from redis.asyncio import Redis

from gencoach.constants import Keys
from gencoach.protocol import AnyEvent, parse_event
from gencoach.service.store.graphstore import META, GraphStore
from gencoach.service.store.sequencing import PARKED, RELEASED, Applying
from tests.support.graphs import apply_known, known_events

pytestmark = pytest.mark.asyncio

KEYS = Keys()


def _renumbered(events: list[AnyEvent], start: int) -> list[AnyEvent]:
    return [event.model_copy(update={"seq": start + index}) for index, event in enumerate(events)]


def _event(kind: str, seq: int, run_id: str = "r1", **fields: Any) -> AnyEvent:
    return parse_event({"type": kind, "run_id": run_id, "seq": seq, **fields})


async def _assert_in_order_graph(store: GraphStore, async_redis: Redis) -> None:
    """The run r1 in `store` is the graph the known run gives delivered in order."""
    graph = await store.load("r1")
    reference = await apply_known(GraphStore(async_redis, Keys("reference")))
    assert graph is not None
    nodes = ("roots", "situations", "candidates", "executions", "links", "members")
    assert {name: getattr(graph, name) for name in nodes} == {
        name: getattr(reference, name) for name in nodes
    }


async def _apply(store: GraphStore, events: list[AnyEvent]) -> Applying:
    """Apply as intake does: the step, then its confirmation and the run's place in gaps."""
    done = await store.sequencer.apply(events)
    pipe = store.client.pipeline(transaction=False)
    store.sequencer.confirm(pipe, done)
    await pipe.execute()
    return done


async def test_events_whose_run_started_is_held_elsewhere_wait_and_apply_in_order(
    store: GraphStore, async_redis: Redis
) -> None:
    """Every event but run.started arrives first (another controller holds it): each
    waits, none is refused; run.started applies them all, in seq order, in the same step,
    and the graph is the one in-order delivery gives, storage ids included."""
    events = known_events()
    waiting = await _apply(store, events[1:])
    assert {result.outcome for result in waiting.results} == {"parked"}
    assert await store.state("r1") is None
    assert await async_redis.zscore(KEYS.gaps, "r1") is not None

    done = await _apply(store, events[:1])
    assert done.results[0].outcome == "ok"
    assert [item.seq for item in done.released] == list(range(1, len(events)))
    assert {item.applied.outcome for item in done.released} == {"ok"}
    assert [item.event for item in done.released] == events[1:]
    await _assert_in_order_graph(store, async_redis)
    assert await async_redis.exists(KEYS.run("r1", PARKED), KEYS.run("r1", RELEASED)) == 0
    assert await async_redis.zscore(KEYS.gaps, "r1") is None


async def test_any_arrival_order_gives_the_in_order_graph(
    store: GraphStore, async_redis: Redis
) -> None:
    """A run numbered from seq 1000, its events delivered in random batches of random
    order, some twice: the graph is the in-order one and nothing is refused."""
    rng = random.Random(29)
    events = _renumbered(known_events(), 1000)
    shuffled = events + rng.sample(events, 8)  # some delivered twice
    rng.shuffle(shuffled)
    outcomes: list[str] = []
    while shuffled:
        size = rng.randint(1, 5)
        batch, shuffled = shuffled[:size], shuffled[size:]
        done = await _apply(store, batch)
        outcomes += [result.outcome for result in done.results]
        outcomes += [item.applied.outcome for item in done.released]
    assert "err" not in outcomes
    await _assert_in_order_graph(store, async_redis)
    assert await async_redis.exists(KEYS.run("r1", PARKED)) == 0


async def test_an_event_sent_again_while_it_waits_is_a_duplicate(store: GraphStore) -> None:
    """A waiting event delivered again is a duplicate of the waiting one (marked so, since
    nothing of it is applied yet); once applied, it is a plain duplicate."""
    events = known_events()
    await _apply(store, events[:3])
    (first,) = (await _apply(store, events[4:5])).results
    (again,) = (await _apply(store, events[4:5])).results
    assert (first.outcome, again.outcome, again.waiting) == ("parked", "dup", True)
    done = await _apply(store, events[3:4])
    assert [item.seq for item in done.released] == [4]
    (late,) = (await _apply(store, events[4:5])).results
    assert (late.outcome, late.waiting) == ("dup", False)


async def test_events_numbered_below_run_started_apply_when_it_arrives(store: GraphStore) -> None:
    """A generator that numbers its events below its run.started's seq loses none: they
    wait for the run to start and apply then, as late events."""
    events = known_events()
    started = events[0].model_copy(update={"seq": 50})
    done = await _apply(store, [*_renumbered(events[1:3], 10)])
    assert {result.outcome for result in done.results} == {"parked"}
    done = await _apply(store, [started])
    assert [(item.seq, item.applied.outcome) for item in done.released] == [(10, "ok"), (11, "ok")]
    (next_one,) = (await _apply(store, _renumbered(events[3:4], 51))).results
    assert next_one.outcome == "ok"


async def test_a_gap_that_outlasts_the_timeout_is_released_naming_the_missing_seq(
    async_redis: Redis,
) -> None:
    """When the wait times out, the waiting events apply without the missing one; those
    that needed it are refused naming it, and once it arrives it applies, and so does
    what comes after it."""
    store = GraphStore(async_redis, KEYS, gap_timeout_s=0)
    events = known_events()
    await _apply(store, events[:6])
    done = await _apply(store, events[7:])  # seq 6 (situation S_b, after c1) is missing
    refused = {item.seq: item for item in done.released if item.applied.outcome == "err"}
    assert sorted(refused) == [7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18]
    assert refused[7].applied.reason.startswith("unknown situation S_b")
    assert {item.missing for item in done.released} == {"6"}
    assert [item.applied.outcome for item in done.released if item.seq > 18] == ["ok"] * 3
    (late,) = (await _apply(store, events[6:7])).results
    assert late.outcome == "ok"
    (after,) = (await _apply(store, [_event("run.finished", len(events))])).results
    assert after.outcome == "ok"


async def _sweep(store: GraphStore) -> Applying:
    """A sweep, confirmed as intake confirms it."""
    done = await store.sequencer.sweep()
    pipe = store.client.pipeline(transaction=False)
    store.sequencer.confirm(pipe, done)
    await pipe.execute()
    return done


async def test_a_gap_no_pending_entry_can_fill_is_released_by_the_sweep(
    store: GraphStore, async_redis: Redis
) -> None:
    """A run whose missing events no controller holds (a generator that resumed at a
    higher seq) waits only until a sweep sees that no older entry of the events stream is
    pending; an older entry held by a controller keeps it waiting until acknowledged."""
    events = known_events(finished=True)
    await async_redis.xgroup_create(KEYS.events, "controllers", id="0", mkstream=True)
    older = await async_redis.xadd(KEYS.events, {"event": "held elsewhere"})
    await async_redis.xreadgroup("controllers", "other", {KEYS.events: ">"})
    await _apply(store, events[:5])
    resumed = events[-1].model_copy(update={"seq": 500})
    brought = cast(
        bytes, await async_redis.xadd(KEYS.events, {"event": "the resumed run.finished"})
    )
    done = await store.sequencer.apply([resumed], [brought])
    assert done.results[0].outcome == "parked"
    pipe = async_redis.pipeline(transaction=False)
    store.sequencer.confirm(pipe, done)
    await pipe.execute()
    assert (await _sweep(store)).released == []  # `older` may hold seq 5..499
    await async_redis.xack(KEYS.events, "controllers", older)
    (released,) = (await _sweep(store)).released
    assert (released.seq, released.applied.outcome, released.missing) == (500, "ok", "5-499")
    assert await store.state("r1") == "finished"
    assert await async_redis.zcard(KEYS.gaps) == 0


async def test_a_wait_held_up_by_a_stuck_controller_times_out(async_redis: Redis) -> None:
    """A run whose gap an older entry might fill, held by a controller that never lets it
    go, waits `gap_timeout_s` without progress, then its waiting events apply without
    the missing ones."""
    store = GraphStore(async_redis, KEYS, gap_timeout_s=1)
    events = known_events()
    await async_redis.xgroup_create(KEYS.events, "controllers", id="0", mkstream=True)
    await async_redis.xadd(KEYS.events, {"event": "held for ever"})
    await async_redis.xreadgroup("controllers", "stuck", {KEYS.events: ">"})
    brought = cast(bytes, await async_redis.xadd(KEYS.events, {"event": "seq 6"}))
    await _apply(store, events[:5])
    done = await store.sequencer.apply(events[6:7], [brought])
    pipe = async_redis.pipeline(transaction=False)
    store.sequencer.confirm(pipe, done)
    await pipe.execute()
    released: list[Any] = []
    with anyio.fail_after(10):  # the wait's deadline, a second or two after it began
        while True:
            released = (await _sweep(store)).released
            if released:
                break
            await anyio.sleep(0.2)
    assert [(item.seq, item.applied.outcome, item.missing) for item in released] == [(6, "ok", "5")]


async def test_released_events_never_handed_on_are_handed_on_by_the_sweep(
    store: GraphStore, async_redis: Redis
) -> None:
    """A controller that dies between releasing events and handing them on (forwarding
    their terminals) loses nothing: they stay in `released`, and a sweep hands them back
    with their outcome once their controller had time to do it (a few seconds), not
    before."""
    events = known_events()
    await _apply(store, [events[0], *events[2:]])  # parked behind seq 1, run in the gaps set
    died = await store.sequencer.apply(events[1:2])  # released, never confirmed
    assert len(died.released) == len(events) - 2
    assert await async_redis.hlen(KEYS.run("r1", RELEASED)) == len(events) - 2
    assert (await _sweep(store)).released == []  # its controller may be handing them on
    assert await async_redis.zscore(KEYS.gaps, "r1") is not None
    with anyio.fail_after(20):
        while True:
            again = await _sweep(store)
            if again.released:
                break
            await anyio.sleep(0.5)
    assert [(i.seq, i.applied) for i in again.released] == [
        (i.seq, i.applied) for i in died.released
    ]
    assert await async_redis.exists(KEYS.run("r1", RELEASED)) == 0
    assert await async_redis.zcard(KEYS.gaps) == 0


async def test_own_events_apply_outside_the_generators_order(store: GraphStore) -> None:
    """The controller's own events (coached branches, numbered far above the generator's)
    apply at once and leave the generator's turn where it was."""
    events = known_events()
    await _apply(store, events[:3])
    situation = events[1].model_copy(update={"seq": 1 << 40, "situation_id": "S_own"})
    (own,) = await store.apply([situation], own=True)
    assert own.outcome == "ok"
    (next_one,) = (await _apply(store, events[3:4])).results
    assert next_one.outcome == "ok"


async def test_own_events_leave_a_waiting_run_waiting(
    store: GraphStore, async_redis: Redis
) -> None:
    """Own events applied while the generator's events wait behind a gap leave the wait as
    it was (its parked events, its since, its place in the gaps set): the gap fills as
    before, releasing the waiting events in order."""
    events = known_events()
    await _apply(store, events[:3])
    waiting = await _apply(store, events[4:6])  # parked behind seq 3
    assert {result.outcome for result in waiting.results} == {"parked"}
    wait = await async_redis.hget(KEYS.run("r1", PARKED), "wait")
    deadline = await async_redis.zscore(KEYS.gaps, "r1")
    assert wait is not None
    assert deadline is not None
    situation = events[1].model_copy(update={"seq": 1 << 40, "situation_id": "S_own"})
    (own,) = await store.apply([situation], own=True)
    assert own.outcome == "ok"
    assert await async_redis.hget(KEYS.run("r1", PARKED), "wait") == wait
    assert await async_redis.zscore(KEYS.gaps, "r1") == deadline
    done = await _apply(store, events[3:4])
    assert [item.seq for item in done.released] == [4, 5]
    assert {item.applied.outcome for item in done.released} == {"ok"}


async def test_own_nodes_applied_again_are_duplicates_by_their_ids(
    store: GraphStore, async_redis: Redis
) -> None:
    """A coached situation and candidate applied again (a reinjection repeated after a
    crash) are duplicates by their ids, the graph unchanged, their seqs never recorded;
    a generator's event reusing an id is still refused."""
    events = known_events()
    await _apply(store, events[:3])
    situation = events[1].model_copy(update={"seq": 1 << 40, "situation_id": "S_own"})
    candidate = events[2].model_copy(
        update={"seq": (1 << 40) + 1, "situation_id": "S_own", "candidate_id": "c_own"}
    )
    first = await store.apply([situation, candidate], own=True)
    assert [result.outcome for result in first] == ["ok", "ok"]
    before = await store.load("r1")
    again = await store.apply([situation, candidate], own=True)
    assert [result.outcome for result in again] == ["dup", "dup"]
    assert await store.load("r1") == before
    assert not await async_redis.sismember(KEYS.run("r1", "seqs"), str(1 << 40))
    reused = events[1].model_copy(update={"seq": events[3].seq, "situation_id": "S_own"})
    (refused,) = (await _apply(store, [reused])).results
    assert refused.outcome == "err"


async def test_runs_started_before_ordering_apply_as_they_come(
    store: GraphStore, async_redis: Redis
) -> None:
    """A run started by an earlier version (no turn recorded) keeps applying its events as
    they come, refusing what does not fit, rather than waiting on turns it never kept."""
    events = known_events()
    await _apply(store, events[:3])
    await async_redis.hdel(KEYS.run("r1", META), "next_seq")
    (after_a_gap,) = (await _apply(store, [events[6]])).results  # S_b, after c1
    assert after_a_gap.outcome == "ok"
