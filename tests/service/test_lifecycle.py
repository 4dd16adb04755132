"""A coaching request's life is one table, and `RequestStore` its only writer: every
transition of the table is stored (and counted) once, any other is refused with nothing
written, and a move from a stale snapshot loses to the writer that moved first, limits
and all. Against a real Redis."""

from __future__ import annotations

import re
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from redis.asyncio import Redis

from gencoach.config import Limits
from gencoach.constants import Keys
from gencoach.limits import StageLimits
from gencoach.metrics import MetricsRecorder
from gencoach.metrics.catalog import REQUESTS as ARRIVALS
from gencoach.protocol.events import StageEnd
from gencoach.protocol.jobs import JobName, JobResult
from gencoach.service.branching import reinjection
from gencoach.service.branching.coached_branches import BranchRecorder, node_ids
from gencoach.service.branching.reinjection import Reinjector
from gencoach.service.coaching.decider import BranchesRecorded, CandidateExecuted, Event
from gencoach.service.coaching.lifecycle import (
    TERMINAL,
    TRANSITIONS,
    IllegalTransition,
    RequestState,
)
from gencoach.service.coaching.requests import (
    REQUESTS,
    WATCH_S,
    AdmissionTerms,
    Applied,
    CoachingRequest,
    RequestStore,
    deadline_member,
)
from gencoach.service.pipeline import CoachingPipeline
from gencoach.service.recovery.reconcile import next_look_s
from gencoach.service.store.graphstore import ATTEMPTS, GraphStore
from tests.support.graphs import apply_known
from tests.support.requests import force_admit, force_move, force_prove

LIMITS = Limits(max_pending_per_stage=2, max_unproven_per_stage=4)
LEASE_S = 60.0
ALLOWED = sorted((source, target) for source, targets in TRANSITIONS.items() for target in targets)
STATES: list[RequestState] = list(TRANSITIONS)
REFUSED = sorted(
    (source, target) for source in STATES for target in STATES if target not in TRANSITIONS[source]
)


def _request(state: RequestState, candidate_id: int = 1, **changes: object) -> CoachingRequest:
    return CoachingRequest(
        request_id=f"r1:{candidate_id}:failure",
        run_id="r1",
        route="failure",
        kind="failure",
        type_coaching="failure:decision",
        candidate_id=candidate_id,
        candidate_gen_id=f"c{candidate_id}",
        stage_id=0,
        state="opportunity",
        **changes,
    ).moved(state)


async def _leave(client: Redis, request: CoachingRequest) -> None:
    """Leave a request in its state, as the writer that moved it there would have."""
    await client.hset(
        Keys().run(request.run_id, REQUESTS), request.request_id, request.model_dump_json()
    )


async def _queued(requests: RequestStore, job: JobName, candidate_id: int = 1) -> CoachingRequest:
    """A new request, admitted to its stage with its `job` queued."""
    opportunity = _request("opportunity", candidate_id)
    await requests.create(opportunity)
    queued = opportunity.moved("admitted").moved("queued", job=job)
    assert await force_admit(requests, opportunity, queued, LIMITS, LEASE_S) is not None
    return queued


def _arrivals(metrics: MetricsRecorder, state: str) -> float:
    return metrics.pending().get((ARRIVALS.name, ("failure", state)), 0)


@pytest.mark.asyncio
@pytest.mark.parametrize(("source", "target"), ALLOWED)
async def test_every_transition_of_the_table_is_stored_and_counted_once(
    async_redis: Redis, source: RequestState, target: RequestState
) -> None:
    metrics = MetricsRecorder()
    requests = RequestStore(async_redis, Keys(), metrics)
    current = _request(source)
    await _leave(async_redis, current)
    moved = current.moved(target, f"to {target}")
    if target == "proven":
        limits = StageLimits(async_redis, Keys())
        await limits.complete("r1", 0, current.request_id, 7)
        assert await force_prove(requests, current, moved, 7)
    elif source == "opportunity" and target == "admitted":
        admission = await force_admit(requests, current, moved, LIMITS, LEASE_S)
        assert admission is not None
        assert admission.outcome == "admitted"
    else:
        assert await force_move(requests, current, moved)
    stored = await requests.get("r1", current.request_id)
    assert stored == moved
    assert _arrivals(metrics, target) == 1


@pytest.mark.asyncio
@pytest.mark.parametrize(("source", "target"), REFUSED)
async def test_a_transition_the_table_does_not_list_is_refused_and_writes_nothing(
    async_redis: Redis, source: RequestState, target: RequestState
) -> None:
    metrics = MetricsRecorder()
    requests = RequestStore(async_redis, Keys(), metrics)
    current = _request(source)
    await _leave(async_redis, current)
    with pytest.raises(IllegalTransition) as refused:
        await force_move(requests, current, current.moved(target, "not allowed"))
    assert f"{source} cannot move to {target} (allowed: " in str(refused.value)
    if source in TERMINAL:
        assert "nothing, it is terminal" in str(refused.value)
    assert await requests.get("r1", current.request_id) == current
    assert metrics.pending() == {}


@pytest.mark.asyncio
async def test_a_path_through_several_states_is_checked_step_by_step(async_redis: Redis) -> None:
    """A move may record several transitions (admitted, then queued), each one allowed."""
    requests = RequestStore(async_redis, Keys())
    current = _request("opportunity")
    await _leave(async_redis, current)
    with pytest.raises(IllegalTransition, match="admitted cannot move to reinjected"):
        await force_move(requests, current, current.moved("admitted").moved("reinjected"))
    with pytest.raises(IllegalTransition, match=r"\(new\) cannot move to queued"):
        await requests.create(_request("queued", candidate_id=2))
    assert await requests.get("r1", current.request_id) == current


@pytest.mark.asyncio
async def test_a_result_handled_meanwhile_wins_over_a_stale_retry(async_redis: Redis) -> None:
    """The reconciler read a request repairing; its result corrected it; the retry the
    reconciler then makes from its stale copy changes nothing: no second job, no second
    slot, and the funnel counts one correction (a retry that overwrote it was corrected
    again by the repeated job's result, so `corrected` exceeded `admitted`)."""
    metrics = MetricsRecorder()
    requests = RequestStore(async_redis, Keys(), metrics)
    limits = StageLimits(async_redis, Keys())
    queued = await _queued(requests, "repair")
    repairing = queued.moved("repairing")
    assert await force_move(requests, queued, repairing)
    snapshot = repairing  # what the reconciler read

    assert await force_move(requests, repairing, repairing.moved("corrected"))
    retried = snapshot.moved("queued", "retry: the repair worker's lease lapsed", attempt=2)
    assert await force_admit(requests, snapshot, retried, LIMITS, LEASE_S) is None

    stored = await requests.get("r1", queued.request_id)
    assert stored is not None
    assert (stored.state, stored.attempt) == ("corrected", 1)
    assert (await limits.counts("r1", 0)).pending == 1
    assert _arrivals(metrics, "admitted") == _arrivals(metrics, "corrected") == 1


class _ReadBeforeAMove(RequestStore):
    """A store whose next read answers `snapshot`: the copy a reader took just before
    another writer moved the request."""

    snapshot: CoachingRequest | None = None

    async def get(self, run_id: str, request_id: str) -> CoachingRequest | None:
        if self.snapshot is not None:
            snapshot, self.snapshot = self.snapshot, None
            return snapshot
        return await super().get(run_id, request_id)


class _NoReads(RequestStore):
    """A store that must not be read: every request comes with its copy."""

    async def get(self, run_id: str, request_id: str) -> CoachingRequest | None:
        raise AssertionError(f"request {request_id} was read")


def _result_pipeline(client: Redis, requests: RequestStore) -> CoachingPipeline:
    """A pipeline for declined diagnoses, which move the request through the store alone:
    the stages a correction is handed to (jobs, reinjection, routing) are not reached."""
    unused: Any = None
    limits = StageLimits(client, Keys())
    graph = GraphStore(client, Keys())
    return CoachingPipeline(
        client, Keys(), graph, requests, limits, unused, unused, unused, unused, unused, unused
    )


def _declined(request_id: str, record: str | None = None) -> JobResult:
    """A diagnosis's result that finds nothing to correct, carrying `record` if given."""
    return JobResult(
        request_id=request_id,
        run_id="r1",
        job="diagnosis",
        status="declined",
        reason="nothing to correct",
        record=record,
    )


@pytest.mark.asyncio
async def test_a_result_read_before_its_request_showed_running_still_applies(
    async_redis: Redis,
) -> None:
    """The result handler read the request `queued`; before it wrote, the reconciler
    showed it `diagnosing` (it saw the worker had taken the job, which had already ended).
    The handler's move is refused as stale, and the result is applied to the request as it
    now stands: the finished work is not lost, to be done again once the lease lapsed."""
    requests = _ReadBeforeAMove(async_redis, Keys())
    limits = StageLimits(async_redis, Keys())
    queued = await _queued(requests, "diagnosis")
    assert await force_move(requests, queued, queued.moved("diagnosing", "a worker took the job"))
    requests.snapshot = queued
    await _result_pipeline(async_redis, requests).on_result(_declined(queued.request_id))

    stored = await requests.get("r1", queued.request_id)
    assert stored is not None
    assert [step.state for step in stored.history][-2:] == ["diagnosing", "declined"]
    assert [record.status for record in stored.jobs] == ["declined"]
    assert (await limits.counts("r1", 0)).pending == 0


@pytest.mark.asyncio
async def test_a_result_carrying_its_request_moves_it_without_reading_it(
    async_redis: Redis,
) -> None:
    """The result carries the request as the worker's taking left it: the controller moves
    it on from that copy, reading nothing; a stale copy (taken before another writer moved
    the request) costs a read, and the result still applies to the request as it stands."""
    queued = await _queued(RequestStore(async_redis, Keys()), "diagnosis")
    running = queued.moved("diagnosing", "a worker took the job")
    assert await force_move(RequestStore(async_redis, Keys()), queued, running)
    declined = _declined(queued.request_id, running.model_dump_json())
    await _result_pipeline(async_redis, _NoReads(async_redis, Keys())).on_result(declined)
    stored = await RequestStore(async_redis, Keys()).get("r1", queued.request_id)
    assert stored is not None
    assert [step.state for step in stored.history][-2:] == ["diagnosing", "declined"]

    other = await _queued(RequestStore(async_redis, Keys()), "diagnosis", candidate_id=2)
    requests = RequestStore(async_redis, Keys())
    assert await force_move(requests, other, other.moved("diagnosing", "a worker took it"))
    stale = _declined(other.request_id, other.model_dump_json())
    await _result_pipeline(async_redis, requests).on_result(stale)
    stored = await requests.get("r1", other.request_id)
    assert stored is not None
    assert [step.state for step in stored.history][-2:] == ["diagnosing", "declined"]


@pytest.mark.asyncio
async def test_an_outcome_read_before_the_branch_showed_executed_still_proves(
    async_redis: Redis,
) -> None:
    """The outcome handler read the request `reinjected`; before it wrote, intake's
    report of the branch's execution marked it `executed`. The
    handler's move is refused as stale, and the outcome applies to the request as it now
    stands: the attempt is proven, not lost to end `unproven` with its run."""
    keys = Keys()
    requests = _ReadBeforeAMove(async_redis, keys)
    limits = StageLimits(async_redis, keys)
    store = GraphStore(async_redis, keys)
    queued = await _queued(requests, "repair")
    corrected = queued.moved("corrected")
    assert await force_move(requests, queued, corrected)
    await limits.complete("r1", 0, queued.request_id, 7)
    await async_redis.hset(keys.run("r1", ATTEMPTS), "#7", f"{queued.request_id}|point")
    reinjected = corrected.moved("reinjected", attempt_ids=[7])
    assert await force_move(requests, corrected, reinjected)
    assert await force_move(requests, reinjected, reinjected.moved("executed"))
    requests.snapshot = reinjected
    # Proving touches the store and the recorder alone: the agent, the
    # budgets, the examples and the registry are not reached for a run with no graph.
    unused: Any = None
    recorder = BranchRecorder(async_redis, keys, store)
    reinjector = Reinjector(store, requests, recorder, unused, unused, unused, unused)
    await reinjector.outcome("r1", [7], StageEnd(event="success", state="optimal"), 0)
    reinjector.close()  # the submissions and marks `run` would read: none here

    stored = await requests.get("r1", queued.request_id)
    assert stored is not None
    assert [step.state for step in stored.history][-3:] == ["reinjected", "executed", "proven"]
    assert (await limits.counts("r1", 0)).proven == 1


@pytest.mark.asyncio
async def test_a_branch_the_generator_executed_marks_its_request_executed(
    async_redis: Redis,
) -> None:
    """Intake reports every execution it applied: a coached candidate's moves its request
    to `executed` at once, with no reconciliation look; one executed while this controller
    was still reinjecting its request is marked once that reinjection is done; a
    generator's own candidate changes nothing."""
    keys = Keys()
    requests = _Marks(async_redis, keys)
    store = GraphStore(async_redis, keys)
    unused: Any = None
    recorder = BranchRecorder(async_redis, keys, store)
    reinjector = Reinjector(store, requests, recorder, unused, unused, unused, unused)
    moved: dict[int, CoachingRequest] = {}
    for candidate_id in (1, 2):
        queued = await _queued(requests, "repair", candidate_id)
        corrected = queued.moved("corrected")
        assert await force_move(requests, queued, corrected)
        moved[candidate_id] = corrected
    first = moved[1].moved("reinjected", attempt_ids=[7])
    assert await force_move(requests, moved[1], first)

    async with anyio.create_task_group() as tasks:
        await tasks.start(reinjector.run)
        reinjector.executed("r1", "c1")  # the generator's own candidate
        reinjector.executed("r1", node_ids(first, "replacement")[1])
        with anyio.fail_after(10):
            assert await requests.marked.receive() == (first.request_id, "executed")
        # The second's reinjection is under way here when its branch runs.
        second = moved[2]
        reinjector.in_progress.add(second.request_id)
        reinjector.executed("r1", node_ids(second, "recovery")[1])
        await anyio.wait_all_tasks_blocked()
        assert await force_move(requests, second, second.moved("reinjected", attempt_ids=[8]))
        reinjector.in_progress.discard(second.request_id)
        await reinjector.reinject(second)  # finds it reinjected: only its end runs
        with anyio.fail_after(10):
            assert await requests.marked.receive() == (second.request_id, "executed")
        tasks.cancel_scope.cancel()
    reinjector.close()
    requests.close()


class _Marks(RequestStore):
    """A request store that tells of each `CandidateExecuted` it applied, and the state."""

    def __init__(self, client: Redis, keys: Keys) -> None:
        super().__init__(client, keys)
        self._sent, self.marked = anyio.create_memory_object_stream[tuple[str, str]](10)

    async def apply(
        self, request: CoachingRequest, event: Event, terms: AdmissionTerms | None = None
    ) -> Applied:
        applied = await super().apply(request, event, terms)
        if isinstance(event, CandidateExecuted):
            self._sent.send_nowait((request.request_id, applied.request.state))
        return applied

    def close(self) -> None:
        self._sent.close()
        self.marked.close()


@pytest.mark.parametrize("situation_id", [0, 1], ids=["root", "non-root"])
@pytest.mark.asyncio
async def test_the_exploration_budget_holds_under_claims_at_once(
    async_redis: Redis, situation_id: int
) -> None:
    """Eight claims at once on one situation with a budget of 2: two are granted and the
    others refused, counting nothing; a holder asking again is granted without counting
    twice; a place given back is taken by the next claim, and giving back a claim not
    held changes nothing."""
    keys = Keys()
    store = GraphStore(async_redis, keys)
    situation = (await apply_known(store)).situations[situation_id]
    recorder = BranchRecorder(async_redis, keys, store)
    granted: dict[str, tuple[bool, int]] = {}

    async def claim(name: str) -> None:
        granted[name] = await recorder.claim_alternative("r1", name, situation, 2)

    async with anyio.create_task_group() as claims:
        for index in range(8):
            claims.start_soon(claim, f"claim-{index}")
    holders = sorted(name for name, (ok, _) in granted.items() if ok)
    assert len(holders) == 2
    assert {taken for ok, taken in granted.values() if not ok} == {2}
    assert await recorder.claim_alternative("r1", holders[0], situation, 2) == (True, 2)
    await recorder.release_alternative("r1", "claim-never-held")
    assert await recorder.claim_alternative("r1", "late", situation, 2) == (False, 2)
    await recorder.release_alternative("r1", holders[0])
    assert await recorder.claim_alternative("r1", "late", situation, 2) == (True, 2)
    # A place granted costs three commands: the script's call, the claim and its count.
    before = await _command_calls(async_redis)
    assert await recorder.claim_alternative("r1", "third", situation, 3) == (True, 3)
    assert await _command_calls(async_redis) - before == 3 + 1  # and the INFO that counts


async def _command_calls(client: Redis) -> int:
    stats = await client.info("commandstats")
    return sum(int(value["calls"]) for value in stats.values())


class _CountedReads(RequestStore):
    """A request store that counts the requests read."""

    reads = 0

    async def get(self, run_id: str, request_id: str) -> CoachingRequest | None:
        self.reads += 1
        return await super().get(run_id, request_id)


@pytest.mark.parametrize(
    ("written", "age_s", "reads"),
    [(True, 0.0, 0), (True, reinjection.STALE_S + 1, 1), (False, 0.0, 1)],
    ids=["written-now", "written-long-ago", "read-by-another"],
)
@pytest.mark.asyncio
async def test_a_copy_the_correction_just_wrote_is_reinjected_without_a_read(
    async_redis: Redis,
    monkeypatch: pytest.MonkeyPatch,
    written: bool,
    age_s: float,
    reads: int,
) -> None:
    """The step that corrected a request hands the reinjection its copy, which is not read
    again while younger than `STALE_S` (no other controller takes it over sooner); an older
    copy, or one the reconciler read, is read again once the reinjection is held. Either
    way it is reinjected (here: found unbranchable, its run having no graph)."""
    keys = Keys()
    requests = _CountedReads(async_redis, keys)
    queued = await _queued(requests, "repair")
    corrected = queued.moved("corrected")
    assert await force_move(requests, queued, corrected)
    clock = time.time
    monkeypatch.setattr(reinjection, "time", SimpleNamespace(time=lambda: clock() + age_s))
    store = GraphStore(async_redis, keys)
    unused: Any = None
    reinjector = Reinjector(
        store, requests, BranchRecorder(async_redis, keys, store), *[unused] * 4
    )
    requests.reads = 0
    await reinjector.reinject(corrected, written)
    reinjector.close()  # the submissions and marks `run` would read: none here
    assert requests.reads == reads
    stored = await requests.get("r1", queued.request_id)
    assert stored is not None
    assert stored.state == "error"
    assert stored.history[-1].reason == "the run's graph is gone"


@pytest.mark.asyncio
async def test_an_end_gives_the_slot_back_in_the_same_step(async_redis: Redis) -> None:
    requests = RequestStore(async_redis, Keys())
    limits = StageLimits(async_redis, Keys())
    opportunity = _request("opportunity")
    await requests.create(opportunity)
    queued = opportunity.moved("admitted").moved("queued", job="diagnosis")
    await force_admit(requests, opportunity, queued, LIMITS, LEASE_S)
    assert (await limits.counts("r1", 0)).pending == 1
    # A stale end changes neither the record nor the slot.
    assert not await force_move(requests, opportunity, opportunity.moved("skipped", "stale"))
    assert (await limits.counts("r1", 0)).pending == 1
    assert await force_move(requests, queued, queued.moved("declined", "nothing to correct"))
    assert (await limits.counts("r1", 0)).pending == 0


@pytest.mark.asyncio
async def test_a_refused_admission_leaves_the_request_as_it_was(async_redis: Redis) -> None:
    requests = RequestStore(async_redis, Keys())
    for candidate_id in (1, 2, 3):
        opportunity = _request("opportunity", candidate_id)
        await requests.create(opportunity)
        admitted = opportunity.moved("admitted").moved("queued", job="diagnosis")
        admission = await force_admit(requests, opportunity, admitted, LIMITS, LEASE_S)
        assert admission is not None
        if candidate_id <= LIMITS.max_pending_per_stage:
            assert admission.outcome == "admitted"
            continue
        assert (admission.outcome, admission.reason) == ("refused", "pending 2 of 2")
        assert await requests.get("r1", opportunity.request_id) == opportunity


@pytest.mark.asyncio
async def test_an_attempt_is_proven_once(async_redis: Redis) -> None:
    requests = RequestStore(async_redis, Keys())
    limits = StageLimits(async_redis, Keys())
    executed = _request("executed")
    await _leave(async_redis, executed)
    assert not await force_prove(requests, executed, executed.moved("proven"), 7)  # never completed
    assert await requests.get("r1", executed.request_id) == executed
    await limits.complete("r1", 0, executed.request_id, 7)
    assert await force_prove(requests, executed, executed.moved("proven"), 7)
    assert not await force_prove(requests, executed, executed.moved("proven"), 7)  # stale now
    assert (await limits.counts("r1", 0)).proven == 1


@pytest.mark.asyncio
async def test_a_note_without_a_transition_is_a_compare_and_set_too(async_redis: Redis) -> None:
    """An executed request notes a failed trajectory's reason; once it moved, it does not."""
    requests = RequestStore(async_redis, Keys())
    executed = _request("executed")
    await _leave(async_redis, executed)
    noted = executed.model_copy(update={"reason": "attempt 7: a trajectory ended in failure"})
    assert await force_move(requests, executed, noted)
    unproven = noted.moved("unproven", "the run finished")
    assert await force_move(requests, noted, unproven)
    assert not await force_move(requests, noted, noted.model_copy(update={"reason": "late"}))
    assert await requests.get("r1", executed.request_id) == unproven


@pytest.mark.asyncio
async def test_a_copy_in_the_same_state_and_attempt_but_older_is_stale(
    async_redis: Redis,
) -> None:
    """A diagnosis result handled while its request was still queued moves it to queued
    for the repair job, same attempt: a writer still holding the first `queued` loses."""
    requests = RequestStore(async_redis, Keys())
    opportunity = _request("opportunity")
    await requests.create(opportunity)
    diagnosis = opportunity.moved("admitted").moved("queued", job="diagnosis")
    await force_admit(requests, opportunity, diagnosis, LIMITS, LEASE_S)
    repair = diagnosis.moved("queued", "diagnosed step 1", job="repair")
    assert await force_move(requests, diagnosis, repair)
    assert not await force_move(requests, diagnosis, diagnosis.moved("diagnosing"))
    assert await requests.get("r1", opportunity.request_id) == repair


def test_the_docs_show_the_table_the_code_enforces() -> None:
    """docs/coaching.md's "Transitions" table lists exactly `TRANSITIONS`."""
    docs = (Path(__file__).parents[2] / "docs" / "coaching.md").read_text(encoding="utf-8")
    section = docs.split("### Transitions\n", 1)[1].split("\n\n", 2)[1]
    shown: dict[str, set[str]] = {}
    for line in section.splitlines()[2:]:
        _, sources, targets, _ = line.split("|")
        for source in re.findall(r"`(\w+)`", sources):
            shown[source] = set(re.findall(r"`(\w+)`", targets))
    assert shown == {source: set(targets) for source, targets in TRANSITIONS.items()}


@pytest.mark.asyncio
async def test_a_request_is_looked_at_only_once_its_deadline_comes_and_until_it_ends(
    async_redis: Redis,
) -> None:
    """Opening a request gives it a deadline `watch_s` ahead; each move that leaves it open
    pushes the deadline back (a request that moves on is never due), an end removes it,
    and a write refused as stale still leaves it watched; `due` answers only the requests
    whose deadline came, so a reconciliation pass costs what is due, not what is open."""
    requests = RequestStore(async_redis, Keys())
    requests.watch_s = 0.0  # due at once: what a pass sees once the deadline came
    first, second = _request("opportunity"), _request("opportunity", candidate_id=2)
    await requests.create(first)
    await requests.create(second)
    assert sorted(await requests.due(10)) == [("r1", first.request_id), ("r1", second.request_id)]
    requests.watch_s = 60.0
    queued = first.moved("admitted").moved("queued", job="diagnosis")
    assert await force_admit(requests, first, queued, LIMITS, LEASE_S) is not None
    assert await requests.due(10) == [("r1", second.request_id)]  # pushed back by the move
    assert not await force_move(requests, first, first.moved("skipped", "stale"))
    assert await force_move(requests, second, second.moved("skipped", "not coached"))
    assert await requests.due(10) == []
    assert await async_redis.zcard(Keys().request_deadlines) == 1  # the queued one, ahead
    await requests.watch(queued, 0.0)
    assert await requests.due(10) == [("r1", queued.request_id)]
    assert await force_move(requests, queued, queued.moved("declined", "nothing to correct"))
    assert await async_redis.zcard(Keys().request_deadlines) == 0
    await requests.watch(queued, 0.0, xx=True)  # ended: not watched again
    assert await async_redis.zcard(Keys().request_deadlines) == 0


@pytest.mark.asyncio
async def test_a_job_taken_keeps_the_look_its_queueing_set(async_redis: Redis) -> None:
    """A worker's take moves its request to running without a deadline of its own: the
    look its queueing set comes sooner than the take's would, and finds it running. The
    moves around it push the deadline back as every move that leaves a request open."""
    keys = Keys()
    requests = RequestStore(async_redis, keys)
    queued = await _queued(requests, "diagnosis")
    member = deadline_member("r1", queued.request_id)
    set_by_queueing = await async_redis.zscore(keys.request_deadlines, member)
    running = queued.moved("diagnosing")
    requests.watch_s = 60.0  # a push would land a minute ahead
    assert await force_move(requests, queued, running)
    assert await async_redis.zscore(keys.request_deadlines, member) == set_by_queueing
    repair = running.moved("queued", job="repair")
    assert await force_move(requests, running, repair)
    pushed = await async_redis.zscore(keys.request_deadlines, member)
    assert pushed is not None
    assert set_by_queueing is not None
    assert pushed > set_by_queueing
    assert await force_move(requests, repair, repair.moved("repairing"))
    assert await async_redis.zscore(keys.request_deadlines, member) == pushed


@pytest.mark.asyncio
async def test_recorded_branches_complete_their_slots_in_the_step_that_moves_the_request(
    async_redis: Redis,
) -> None:
    """Reporting a correction's branches moves it to `reinjected` and, in the same script
    call, turns its pending slot into the first branch's completed attempt and records
    the second branch as an attempt of its own; reported again, it changes nothing."""
    requests = RequestStore(async_redis, Keys())
    limits = StageLimits(async_redis, Keys())
    queued = await _queued(requests, "repair")
    corrected = queued.moved("corrected")
    assert await force_move(requests, queued, corrected)
    assert (await limits.counts("r1", 0)).pending == 1
    recorded = BranchesRecorded((7, 8), ("replacement", "recovery"))
    applied = await requests.apply(corrected, recorded)
    assert applied.stored
    assert (applied.request.state, applied.request.attempt_ids) == ("reinjected", [7, 8])
    # Its branches' outcome comes with the run's events: reconciliation no longer looks.
    member = deadline_member("r1", corrected.request_id)
    assert await async_redis.zscore(Keys().request_deadlines, member) is None
    counts = await limits.counts("r1", 0)
    assert (counts.pending, counts.completed) == (0, 2)
    again = await requests.apply(corrected, recorded)
    assert not again.stored
    assert (await limits.counts("r1", 0)).completed == 2


def test_each_watched_state_has_its_cadence() -> None:
    """A job's slot is looked at a third of a lease on, a correction awaiting reinjection
    after `STALE_S`, a bare opportunity after a lease, whatever their age."""
    assert next_look_s(_request("diagnosing"), 30.0) == 10.0
    assert next_look_s(_request("corrected"), 30.0) == 5.0
    assert next_look_s(_request("opportunity"), 30.0) == 30.0


@pytest.mark.asyncio
async def test_a_proposal_keeps_the_first_attempt_id_it_was_given(async_redis: Redis) -> None:
    """Each proposal of a request gets an id of its own, kept when it is reinjected again
    (an id drawn then is not kept, and the caller is told the id is not new), and each id
    names its owner."""
    keys = Keys()
    recorder = BranchRecorder(async_redis, keys, GraphStore(async_redis, keys))
    request = _request("corrected")
    first, drawn = await recorder.attempt_id(request, "replacement")
    other, _ = await recorder.attempt_id(request, "recovery")
    assert drawn
    assert first != other
    assert await recorder.attempt_id(request, "replacement") == (first, False)
    assert await recorder.attempt_owner("r1", first) == (request.request_id, "replacement")
    assert await recorder.attempt_owner("r1", other) == (request.request_id, "recovery")


@pytest.mark.asyncio
async def test_a_request_in_flight_is_first_looked_at_a_third_of_a_lease_after_it_moved(
    async_redis: Redis,
) -> None:
    """A request moved in flight (here: its repair queued) is looked at once its slot
    should have been renewed (a third of a lease), not two seconds after the move; one
    that waits to be reinjected, or a store that does not know the leases, keeps the
    first look at two seconds."""
    keys = Keys()
    member = deadline_member("r1", "r1:1:failure")
    requests = RequestStore(async_redis, keys, lease_s=lambda: 30.0)

    async def look_after(current: CoachingRequest, moved: CoachingRequest, look_s: float) -> None:
        """The move sets the next look `look_s` after it, as the clock read just before
        and just after the move bound it (however long a loaded machine takes)."""
        before = time.time()
        assert await force_move(requests, current, moved)
        after = time.time()
        due = (await async_redis.zscore(keys.request_deadlines, member) or 0) / 1000
        assert before + look_s - 0.001 <= due <= after + look_s

    queued = await _queued(requests, "diagnosis")
    running = queued.moved("diagnosing", "a worker took the job")
    assert await force_move(requests, queued, running)  # a take: it keeps the look
    repair = running.moved("queued", job="repair")
    await look_after(running, repair, 10.0)
    repairing = repair.moved("repairing")
    assert await force_move(requests, repair, repairing)
    await look_after(repairing, repairing.moved("corrected"), WATCH_S)


@pytest.mark.asyncio
async def test_a_refused_opportunity_is_stored_skipped_in_one_write(async_redis: Redis) -> None:
    """A request whose route is off is decided before it is stored: one `HSETNX` holds it
    `skipped` with both steps counted, no deadline is set, and no move is made after; a
    second creation of the same id writes nothing."""
    metrics = MetricsRecorder()
    requests = RequestStore(async_redis, Keys(), metrics)
    opportunity = _request("opportunity")
    before = await async_redis.info("commandstats")
    assert await requests.create(opportunity, refused="the failure route is switched off")
    after = await async_redis.info("commandstats")
    writes = {
        name: after[name]["calls"] - before.get(name, {"calls": 0})["calls"]
        for name in after
        if name.startswith("cmdstat_") and name != "cmdstat_info"
    }
    assert {name: count for name, count in writes.items() if count} == {"cmdstat_hsetnx": 1}
    stored = await requests.get("r1", opportunity.request_id)
    assert stored is not None
    assert (stored.state, stored.reason) == ("skipped", "the failure route is switched off")
    assert [step.state for step in stored.history] == ["opportunity", "skipped"]
    assert (_arrivals(metrics, "opportunity"), _arrivals(metrics, "skipped")) == (1, 1)
    member = deadline_member("r1", opportunity.request_id)
    assert await async_redis.zscore(Keys().request_deadlines, member) is None
    assert not await requests.create(opportunity, refused="again")
