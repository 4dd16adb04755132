"""When a run finishes, every open request ends with a reason and gives its slot back;
a run whose generator fell silent is finished as abandoned."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from gencoach.config import Limits
from gencoach.constants import Keys
from gencoach.limits import StageLimits
from gencoach.protocol import CoachingProposal, parse_event
from gencoach.reporting.client import Reporter
from gencoach.service.branching.coached_branches import node_ids
from gencoach.service.coaching.lifecycle import RequestState
from gencoach.service.coaching.requests import REQUESTS, CoachingRequest, RequestStore
from gencoach.service.recovery.runends import RunEnds
from gencoach.service.store.graphstore import ATTEMPTS, META, GraphStore
from tests.support.agent_server import ScriptedAgent
from tests.support.coaching import PRESS_SW4, coaching_settings, report_known, requests_of
from tests.support.controller import ControllerProcess, wait_for
from tests.support.graphs import (
    STAGE_0,
    SUCCESS_OPTIMAL,
    chain_run_events,
    known_events,
    known_run_events,
)
from tests.support.llm_server import ScriptedLLMServer

OPEN: dict[RequestState, tuple[RequestState, str]] = {
    "opportunity": ("skipped", "the run finished before the opportunity was routed"),
    "admitted": ("abandoned", "the run finished while the request was admitted"),
    "diagnosing": ("abandoned", "the run finished while the request was diagnosing"),
    "repairing": ("abandoned", "the run finished while the request was repairing"),
    "rewriting": ("abandoned", "the run finished while the request was rewriting"),
    "corrected": ("abandoned", "the run finished before the correction was reinjected"),
    "reinjected": ("abandoned", "the run finished before the branch was executed"),
    "executed": ("unproven", "the run finished before the branch reached the end of its stage"),
}


def _request(state: RequestState, index: int) -> CoachingRequest:
    return CoachingRequest(
        request_id=f"r1:{index}:failure",
        run_id="r1",
        route="failure",
        kind="failure",
        type_coaching="failure:decision",
        candidate_id=index,
        candidate_gen_id=f"c{index}",
        stage_id=0,
        state="admitted",
    ).moved(state)


async def _stored(client: Redis, keys: Keys, request: CoachingRequest) -> None:
    """Leave a request in its state, as the controller that moved it there would have."""
    await client.hset(
        keys.run(request.run_id, REQUESTS), request.request_id, request.model_dump_json()
    )


@pytest.mark.asyncio
async def test_open_requests_of_a_finished_run_end_with_what_the_end_interrupted(
    store: GraphStore, async_redis: Redis
) -> None:
    """Each open state ends terminal with its own reason, and no pending slot is left."""
    await store.apply(known_events("r1", finished=True))
    keys = Keys()
    requests = RequestStore(async_redis, keys)
    limits = StageLimits(async_redis, keys)
    for index, state in enumerate(OPEN):
        request = _request(state, index)
        await _stored(async_redis, keys, request)
        if state == "opportunity":
            continue  # admitted in the step that moves it on: it holds no slot
        await limits.admit("r1", 0, request.request_id, Limits(max_pending_per_stage=20), 60.0)
    await _stored(async_redis, keys, _request("proven", 99))
    ends = RunEnds(async_redis, keys, requests, store)

    assert (await ends.settle("r1", after_s=0.0)).done

    ended = {r.candidate_id: r for r in await requests.all("r1")}
    for index, state in enumerate(OPEN):
        assert (ended[index].state, ended[index].reason) == OPEN[state]
    assert ended[99].state == "proven"
    assert (await limits.counts("r1", 0)).pending == 0


@pytest.mark.asyncio
async def test_requests_wait_for_the_settling_delay(store: GraphStore, async_redis: Redis) -> None:
    """Outcomes reported just before the end still prove: nothing ends inside the delay."""
    await store.apply(known_events("r1", finished=True))
    keys = Keys()
    requests = RequestStore(async_redis, keys)
    await _stored(async_redis, keys, _request("reinjected", 1))
    ends = RunEnds(async_redis, keys, requests, store)
    assert not (await ends.settle("r1", after_s=60.0)).done
    assert (await requests.get("r1", "r1:1:failure")).state == "reinjected"  # type: ignore[union-attr]


@pytest.mark.asyncio
@pytest.mark.parametrize("state", ["executed", "reinjected"])
async def test_a_request_whose_branch_succeeded_is_proven_at_the_run_end(
    store: GraphStore, async_redis: Redis, state: RequestState
) -> None:
    """Its stage's success never reached it as an outcome (the terminals' reader held up by
    a Redis outage until after the run's end; or, still `reinjected`, the outcome came
    while a controller's crash had left it `corrected`, and the run ended before a look
    found its branch executed): the run's graph proves it, rather than the end leaving it
    unproven or abandoned. Attempt 1 is the known run's coached alternative, which ends
    stage 0 in success."""
    await store.apply(known_events("r1", finished=True))
    keys = Keys()
    requests = RequestStore(async_redis, keys)
    limits = StageLimits(async_redis, keys)
    request = _request(state, 5).model_copy(update={"attempt_ids": [1]})
    await _stored(async_redis, keys, request)
    await limits.admit("r1", 0, request.request_id, Limits(), 60.0)
    await limits.complete("r1", 0, request.request_id, 1)
    elsewhere = _request("executed", 6).model_copy(update={"attempt_ids": [2], "stage_id": 1})
    await _stored(async_redis, keys, elsewhere)
    ends = RunEnds(async_redis, keys, requests, store)

    settled = await ends.settle("r1", after_s=0.0)

    assert (settled.done, settled.ended) == (True, 2)
    proven = await requests.get("r1", request.request_id)
    assert proven is not None
    assert proven.state == "proven"
    assert (await limits.counts("r1", 0)).proven == 1
    # Attempt 1's success is stage 0's: it proves nothing of a stage-1 request.
    other = await requests.get("r1", elsewhere.request_id)
    assert other is not None
    assert other.state == "unproven"


@pytest.mark.asyncio
async def test_a_silent_run_is_abandoned_and_an_active_one_is_not(
    store: GraphStore, async_redis: Redis
) -> None:
    """Only a run that heard nothing for the idle time is finished, with the reason recorded."""
    await store.apply(known_events("quiet"))
    keys = Keys()
    ends = RunEnds(async_redis, keys, RequestStore(async_redis, keys), store)
    assert not await ends.abandon_if_idle("quiet", 3600.0)
    await async_redis.hset(keys.run("quiet", META), "last_event_at", 0)
    assert await ends.abandon_if_idle("quiet", 3600.0)
    meta = await async_redis.hgetall(keys.run("quiet", META))
    assert meta[b"state"] == b"finished"
    assert meta[b"finish_reason"] == b"abandoned: no event from the generator for 3600 s"


@pytest.mark.slow
def test_a_request_in_flight_when_its_run_finishes_ends_and_frees_its_slot(
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_url: str,
) -> None:
    """With no worker to answer, finishing the run ends its requests with a reason."""
    controller = controller_factory(settings=coaching_settings(llm))
    controller.start()
    report_known(redis_url, "cut", scripted_agent.url)
    wait_for(lambda: len(requests_of(controller, "cut")) == 3, what="three requests open")
    with Reporter("cut", redis_url=redis_url, start_seq=len(known_run_events()) - 1) as report:
        report.emit("run.finished")
    ended = wait_for(
        lambda: (
            (found := requests_of(controller, "cut"))
            and all(r["state"] in ("abandoned", "skipped") for r in found.values())
            and found
        ),
        timeout_s=30,
        what="every request ended after the run finished",
    )
    for request in ended.values():
        assert request["reason"].startswith("the run finished "), request
    stages = httpx.get(f"{controller.url}/v1/runs/cut/stages").json()["stages"]
    assert all(stage["pending"] == 0 for stage in stages), stages


@pytest.mark.slow
def test_a_run_whose_generator_fell_silent_is_abandoned_and_saved(
    controller_factory: Callable[..., ControllerProcess], redis_url: str
) -> None:
    """No event for `abandon_idle_s`: the run is finished as abandoned and its folder written."""
    controller = controller_factory(abandon_idle_s=2)
    controller.start()
    with Reporter("silent", redis_url=redis_url) as report:
        for kind, fields in known_run_events()[:3]:
            report.emit(kind, **fields)
    summary = wait_for(
        lambda: (
            (r := httpx.get(f"{controller.url}/v1/runs/silent")).status_code == 200
            and r.json()["state"] == "saved"
            and r.json()
        ),
        timeout_s=30,
        what="the silent run saved",
    )
    assert (controller.output_dir / "silent" / "config.json").is_file(), summary


@pytest.mark.asyncio
async def test_a_corrected_request_whose_ordered_branch_succeeded_is_proven_at_the_run_end(
    store: GraphStore, async_redis: Redis
) -> None:
    """A controller killed between publishing a correction's order and moving its request
    to `reinjected` leaves it `corrected`; the generator executes the branch, which ends
    its stage in success, and the run ends before a restarted controller reinjects it
    again. The run's end records the branch the request had made (as that move would
    have), then the graph proves it: not abandoned with a successful branch under it."""
    keys = Keys()
    requests = RequestStore(async_redis, keys)
    limits = StageLimits(async_redis, keys)
    request = _request("corrected", 5).model_copy(
        update={
            "proposals": [
                CoachingProposal(
                    reinjection_point_id="replacement",
                    extra_keys={"kind": "replace_decision", "decision": {"say": "sw4"}},
                )
            ]
        }
    )
    situation_id, candidate_id = node_ids(request, "replacement")
    branch: list[tuple[str, dict[str, Any]]] = [
        ("situation.created", {"situation_id": situation_id, "parent_candidate_id": "c1",
         "link": "alternative", "stage": STAGE_0, "coaching_attempt_ids": [9],
         "input": {"id": 1, "instruction": {"type": "env", "content": "{}"}}}),
        ("candidate.created", {"candidate_id": candidate_id, "situation_id": situation_id,
         "response_status": "completed", "origin": "coaching", "coaching_attempt_ids": [9],
         "output": PRESS_SW4}),
        ("candidate.executed", {"candidate_id": candidate_id, "status": "optimal",
         "stage_end": SUCCESS_OPTIMAL}),
        ("run.finished", {}),
    ]  # fmt: skip
    events = known_events("r1")
    events += [
        parse_event({"type": kind, "run_id": "r1", "seq": len(events) + index, **fields})
        for index, (kind, fields) in enumerate(branch)
    ]
    assert {result.outcome for result in await store.apply(events)} == {"ok"}
    await async_redis.hset(keys.run("r1", ATTEMPTS), f"{request.request_id}|replacement", 9)
    await _stored(async_redis, keys, request)
    await limits.admit("r1", 0, request.request_id, Limits(), 60.0)
    ends = RunEnds(async_redis, keys, requests, store)

    assert (await ends.settle("r1", after_s=0.0)).done

    proven = await requests.get("r1", request.request_id)
    assert proven is not None
    assert (proven.state, proven.attempt_ids) == ("proven", [9])
    counts = await limits.counts("r1", 0)
    assert (counts.pending, counts.proven) == (0, 1)


@pytest.mark.asyncio
async def test_a_reinjected_request_whose_branch_ran_ends_unproven_not_abandoned(
    store: GraphStore, async_redis: Redis
) -> None:
    """Intake's mark that its branch ran was lost (a crash, or a branch executed before the
    reinjection's move was stored): the run's graph shows the coached candidate executed,
    so the end marks it `executed` first and it ends `unproven`, as a branch that ran."""
    request = _request("reinjected", 5).model_copy(
        update={
            "attempt_ids": [1],
            "proposals": [CoachingProposal(reinjection_point_id="replacement", extra_keys={})],
        }
    )
    situation_id, candidate_id = node_ids(request, "replacement")
    events = chain_run_events("r1", 1)
    raw: list[dict[str, Any]] = [
        {"type": "situation.created", "situation_id": situation_id, "parent_candidate_id": "c0",
         "stage": {"id": 0, "goal": "press sw0"},
         "input": {"id": 7, "instruction": {"type": "env", "content": "coached"}}},
        {"type": "candidate.created", "candidate_id": candidate_id, "situation_id": situation_id,
         "response_status": "completed", "output": {"say": "coached"}},
        {"type": "candidate.executed", "candidate_id": candidate_id, "status": "ongoing"},
        {"type": "run.finished"},
    ]  # fmt: skip
    first = len(events)
    events += [parse_event({**e, "run_id": "r1", "seq": first + i}) for i, e in enumerate(raw)]
    assert {result.outcome for result in await store.apply(events)} == {"ok"}
    keys = Keys()
    requests = RequestStore(async_redis, keys)
    await _stored(async_redis, keys, request)
    await _stored(async_redis, keys, _request("reinjected", 6))  # its branch never ran

    assert (await RunEnds(async_redis, keys, requests, store).settle("r1", after_s=0.0)).done

    ran = await requests.get("r1", request.request_id)
    assert ran is not None
    assert [step.state for step in ran.history][-3:] == ["reinjected", "executed", "unproven"]
    never = await requests.get("r1", "r1:6:failure")
    assert never is not None
    assert (never.state, never.reason) == OPEN["reinjected"]
