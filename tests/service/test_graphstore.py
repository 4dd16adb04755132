"""Graph state in Redis: events applied once, refused with reasons, and the queries on it."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from gencoach.constants import Keys
from gencoach.protocol import (
    AnyEvent,
    CandidateCreated,
    CoachingMarker,
    SituationCreated,
    parse_event,
)
from gencoach.service.store.graphstore import GraphStore
from gencoach.service.store.trajectory import (
    UnknownNodeError,
    children,
    diagnosable,
    stage_of,
    trajectory,
)
from tests.support.graphs import apply_known, known_events

pytestmark = pytest.mark.asyncio


def _event(kind: str, seq: int, run_id: str = "r1", **fields: Any) -> AnyEvent:
    return parse_event({"type": kind, "run_id": run_id, "seq": seq, **fields})


async def test_applying_twice_changes_nothing(store: GraphStore) -> None:
    """Every event applied a second time is a duplicate and the graph is unchanged."""
    first = await apply_known(store)
    again = await store.apply(known_events())
    assert {result.outcome for result in again} == {"dup"}
    assert await store.load("r1") == first


async def test_events_apply_after_redis_lost_the_script(
    store: GraphStore, async_redis: Redis
) -> None:
    """The apply script is called by its sha alone: after SCRIPT FLUSH (as after a Redis
    restart) it is loaded again and the batch applies, its run watched from its start."""
    events = known_events()
    await async_redis.script_flush()
    results = await store.apply(events[:3])
    assert {result.outcome for result in results} == {"ok"}
    assert await async_redis.zscore(Keys().heard, "r1") is not None
    await async_redis.script_flush()
    assert {result.outcome for result in await store.apply(events[3:])} == {"ok"}
    assert {result.outcome for result in await store.apply(events)} == {"dup"}


async def test_storage_ids_follow_creation_order(store: GraphStore) -> None:
    """Situations and candidates get integer ids 0, 1, 2… in the order they were reported."""
    graph = await apply_known(store)
    assert [graph.situations[sid].situation_id for sid in range(5)] == [
        "S_a", "S_b", "S_c", "S_d", "S_e",
    ]  # fmt: skip
    assert [graph.candidates[cid].candidate_id for cid in range(8)] == [
        "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8",
    ]  # fmt: skip
    assert graph.roots == [0]
    assert graph.links[0] == [(1, "next"), (4, "alternative")]


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        (
            ("candidate.created", {"candidate_id": "c9", "situation_id": "S_zz",
             "response_status": "completed", "output": {"say": "hi"}}),
            "unknown situation S_zz (its situation.created must come first)",
        ),
        (
            ("situation.created", {"situation_id": "S_x", "parent_candidate_id": "c99",
             "stage": {"id": 0, "goal": "g"},
             "input": {"id": 9, "instruction": {"type": "env", "content": "x"}}}),
            "unknown parent candidate c99 (its candidate.created must come first)",
        ),
        (
            ("candidate.executed", {"candidate_id": "c1", "status": "ongoing"}),
            "candidate c1 was already executed",
        ),
        (
            ("situation.created", {"situation_id": "S_a", "parent_candidate_id": None,
             "stage": {"id": 0, "goal": "g"},
             "input": {"id": 9, "instruction": {"type": "user", "content": "x"}}}),
            "situation S_a already exists",
        ),
    ],
)  # fmt: skip
async def test_unapplicable_events_are_refused_with_a_reason(
    store: GraphStore, event: tuple[str, dict[str, Any]], reason: str
) -> None:
    """An event naming an unknown or repeated node at its turn is refused, and nothing is
    written; its seq is not recorded, so the same event sent again is refused again."""
    before = await apply_known(store)
    kind, fields = event
    turn = len(known_events())
    (result,) = await store.apply([_event(kind, turn, **fields)])
    assert (result.outcome, result.reason) == ("err", reason)
    assert await store.load("r1") == before
    (retry,) = await store.apply([_event(kind, turn, **fields)])
    assert retry.outcome == "err", "a refused seq is not recorded as applied"


async def test_events_of_an_unknown_run_are_refused_once_their_wait_ends(
    async_redis: Redis,
) -> None:
    """An event for a run that never started waits for its run.started; refused when the
    wait ends, it names the cause."""
    store = GraphStore(async_redis, Keys(), gap_timeout_s=0)
    done = await store.sequencer.apply([_event("run.finished", 0, run_id="nobody")])
    assert done.results[0].outcome == "parked"
    (released,) = done.released
    assert released.applied.reason == "unknown run: no run.started event was applied for it"
    assert released.missing == "run.started"


async def test_events_after_the_run_finished_are_refused(store: GraphStore) -> None:
    """Once run.finished is applied, later events are refused with the finishing seq."""
    await apply_known(store)
    turn = len(known_events())
    await store.apply([_event("run.finished", turn)])
    (late,) = await store.apply(
        [_event("candidate.executed", turn + 1, candidate_id="c5", status="ongoing")]
    )
    assert late.reason.startswith(f"the run is finished (run.finished was seq {turn})")


async def test_trajectory_crosses_a_linked_stage(store: GraphStore) -> None:
    """A stage-1 candidate's trajectory goes back through stage 0 to its user instruction."""
    graph = await apply_known(store)
    steps = trajectory(graph, 4)  # c5, in S_c (stage 1, linked to stage 0)
    assert [step.candidate.candidate_id for step in steps] == ["c1", "c3", "c5"]
    assert [step.candidate.candidate_id for step in diagnosable(steps)] == ["c5"]
    assert steps[-1].execution is not None
    assert steps[-1].execution.status == "suboptimal"


async def test_trajectory_stops_at_the_user_instruction(store: GraphStore) -> None:
    """A stage-0 candidate's trajectory starts at the root's user instruction."""
    graph = await apply_known(store)
    steps = trajectory(graph, 3)  # c4 in S_b
    assert [step.candidate.candidate_id for step in steps] == ["c1", "c4"]
    assert [step.candidate.candidate_id for step in diagnosable(steps)] == ["c1", "c4"]


async def test_stage_and_children(store: GraphStore) -> None:
    """A node's stage and a situation's candidates are answered; unknown ids are errors."""
    graph = await apply_known(store)
    assert stage_of(graph, 6).id == 1
    assert stage_of(graph, 6).linked_to_prev is True
    assert [c.candidate_id for c in children(graph, 1)] == ["c3", "c4"]
    with pytest.raises(UnknownNodeError, match="run r1 has no situation 42"):
        children(graph, 42)


async def test_lineage_reads_only_the_ancestors(store: GraphStore) -> None:
    """The lineage of a candidate holds its ancestors and gives the same trajectory."""
    graph = await apply_known(store)
    lineage = await store.lineage("r1", 6)  # c7
    assert lineage is not None
    assert sorted(lineage.candidates) == [0, 2, 5, 6]
    assert trajectory(lineage, 6) == trajectory(graph, 6)
    assert await store.lineage("r1", 99) is None


async def test_a_lineage_read_again_is_remembered_until_the_run_id_starts_again(
    store: GraphStore,
) -> None:
    """The second read of a lineage costs one command (the run's state; the executions
    and nodes are remembered); a run started again under the same id after its keys went
    is read afresh, not from the memory of its namesake."""
    await apply_known(store)
    first = await store.lineage("r1", 6)
    before = await _commands(store)
    again = await store.lineage("r1", 6)
    assert again == first
    assert await _commands(store) - before == 1 + 1  # the HMGET, and the INFO that counts
    await store.client.delete(*store.run_keys("r1"))
    events = known_events("r1")
    situation = events[1]
    assert isinstance(situation, SituationCreated)
    events[1] = situation.model_copy(
        update={"stage": situation.stage.model_copy(update={"goal": "new"})}
    )
    assert {result.outcome for result in await store.apply(events)} == {"ok"}
    fresh = await store.lineage("r1", 6)
    assert fresh is not None
    assert fresh.situations[0].stage.goal == "new"


async def test_a_lineage_read_first_takes_two_round_trips_a_level(
    store: GraphStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lineage nothing of which is remembered reads each level's candidate and execution,
    then its situation: two round trips a level, the first level's candidate coming with
    the run's state."""
    await apply_known(store)
    trips = 0
    command, execute = Redis.execute_command, Pipeline.execute

    async def counted_command(self: Redis, *args: Any, **options: Any) -> Any:
        nonlocal trips
        trips += not isinstance(self, Pipeline)
        return await command(self, *args, **options)

    async def counted_execute(self: Pipeline, *args: Any, **options: Any) -> Any:
        nonlocal trips
        trips += 1
        return await execute(self, *args, **options)

    monkeypatch.setattr(Redis, "execute_command", counted_command)
    monkeypatch.setattr(Pipeline, "execute", counted_execute)
    lineage = await store.lineage("r1", 6)  # c7, four levels up to the root
    assert lineage is not None
    assert trips == 2 * len(lineage.candidates) == 8


async def test_a_candidate_created_here_is_known_by_its_id_without_a_read(
    store: GraphStore,
) -> None:
    """The storage id of a candidate this store applied (a coached branch's, say) is
    remembered: asking for it again, as the reconciler's look at the branch does, reads
    nothing."""
    events = known_events("r1")
    results = await store.apply(events[:3])
    created = events[2]
    assert isinstance(created, CandidateCreated)
    before = await _commands(store)
    assert await store.storage_id("r1", created.candidate_id) == results[2].storage_id
    assert await _commands(store) - before == 1  # the INFO that counts


async def test_a_step_reads_back_nothing_it_created(store: GraphStore) -> None:
    """A run's events applied in one step (a fresh run posted whole) read no id of a node
    the same step created, nor a list it appended to already: its reads are the run's
    head and wait, its roots, and the first read of each list it appends to."""
    events = known_events("r1")
    await store.apply(events[:1])
    before = await store.client.info("commandstats")
    assert {result.outcome for result in await store.apply(events[1:])} == {"ok"}
    after = await store.client.info("commandstats")
    graph = await store.load("r1")
    assert graph is not None
    hgets = after["cmdstat_hget"]["calls"] - before["cmdstat_hget"]["calls"]
    assert hgets == 1 + 1 + len(graph.links) + len(graph.members)  # wait, roots, lists


async def _commands(store: GraphStore) -> int:
    stats = await store.client.info("commandstats")
    return sum(int(value["calls"]) for value in stats.values())


async def test_saved_runs_expire(store: GraphStore) -> None:
    """Marking a run saved sets an expiry on every key it owns."""
    await apply_known(store)
    await store.mark_saved("r1", "output/r1", ttl_s=300)
    for key in store.run_keys("r1"):
        ttl = await store.client.ttl(key)
        assert ttl == -2 or 0 < ttl <= 300, key  # -2: the run never wrote that key
    assert await store.state("r1") == "saved"


async def test_applied_diagnosis_bounds_what_is_diagnosable(store: GraphStore) -> None:
    """Steps before a node whose trajectory diagnosis was applied are no longer diagnosable."""
    graph = await apply_known(store)
    plain = trajectory(graph, 6)  # c7: c1, c3 (stage 0), c6, c7 (stage 1)
    assert [s.candidate.candidate_id for s in diagnosable(plain)] == ["c6", "c7"]
    assert [s.in_current_stage for s in plain] == [False, False, True, True]
    bounded = trajectory(graph, 6, {6: CoachingMarker(trajectory_diagnostic_applied=True)})
    assert [s.candidate.candidate_id for s in diagnosable(bounded)] == ["c7"]
