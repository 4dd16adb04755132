"""The generator against a real agent and a real controller: the graph gencoach keeps is the
tree the generator played, and a branch order is executed from the restored situation."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import pytest_asyncio
import redis
from redis.asyncio import Redis as AsyncRedis

from gencoach.constants import Keys
from gencoach.graph import read_save
from gencoach.reporting.client import AsyncReporter
from gencoach.service.store.graphstore import GraphStore
from gencoach.service.store.nodes import RunGraph
from gencoach.sim import EpisodeState
from gencoach.sim.generator import run_generation
from gencoach.sim.options import GenerationOptions, GenerationReport
from tests.sim.orders import branch_order, hold_settling, publish_held
from tests.support.agent_server import ScriptedAgent
from tests.support.controller import ControllerProcess, wait_for
from tests.support.generation_log import Tree, read_log
from tests.support.players import buttons_player

pytestmark = [pytest.mark.slow, pytest.mark.asyncio, pytest.mark.timeout(90)]

RUN = "sim-it"
ATTEMPT = 7


@pytest.fixture
def controller(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> Iterator[ControllerProcess]:
    """A running controller (`gencoach serve`) on the test Redis, killed after the test."""
    process = ControllerProcess(tmp_path, redis_url)
    process.start()
    yield process
    process.stop()


@pytest_asyncio.fixture
async def store(redis_url: str, redis_client: redis.Redis) -> AsyncIterator[GraphStore]:
    """The controller's graphs, read from the test Redis."""
    client = AsyncRedis.from_url(redis_url)
    yield GraphStore(client, Keys())
    await client.aclose()


async def until_graph(store: GraphStore, check: Callable[[RunGraph], bool], what: str) -> RunGraph:
    """Wait (20 s at most) until the run's graph satisfies `check`."""
    with anyio.fail_after(20):
        while True:
            graph = await store.load(RUN)
            if graph is not None and check(graph):
                return graph
            await anyio.sleep(0.05)
    raise AssertionError(what)  # pragma: no cover - fail_after raises first


def by_candidate(graph: RunGraph) -> dict[str, int]:
    """Candidate storage ids by generator id."""
    return {c.candidate_id: storage for storage, c in graph.candidates.items()}


def executed(candidate_id: str) -> Callable[[RunGraph], bool]:
    """A check: the candidate's execution was applied."""
    return lambda graph: by_candidate(graph).get(candidate_id) in graph.executions


async def record_coached_nodes(redis_url: str, graph: RunGraph, right: Any) -> Any:
    """Record the coached situation and candidate as gencoach does; return the anchor."""
    anchor = next(s for s in graph.situations.values() if s.situation_id == "e0-s1")
    coached_input = anchor.input.model_copy(update={"extra_keys": {"coaching": {"kind": "x"}}})
    async with AsyncReporter(RUN, redis_url=redis_url, start_seq=1_000_000) as gencoach:
        await gencoach.emit(
            "situation.created",
            situation_id="coached:s",
            parent_candidate_id=anchor.parent_candidate_id,
            link="alternative",
            stage=anchor.stage.model_dump(mode="json"),
            input=coached_input.model_dump(mode="json"),
            coaching_attempt_ids=[ATTEMPT],
        )
        await gencoach.emit(
            "candidate.created",
            candidate_id="coached:c",
            situation_id="coached:s",
            response_status="completed",
            output=right.output.model_dump(mode="json"),
            memory=right.memory,
            origin="coaching",
            coaching_attempt_ids=[ATTEMPT],
        )
    return anchor


async def test_the_graph_matches_the_generation_and_an_order_is_executed(
    controller: ControllerProcess,
    scripted_agent: ScriptedAgent,
    redis_url: str,
    redis_client: redis.Redis,
    store: GraphStore,
    tmp_path: Path,
) -> None:
    """Same situations, candidates, parents and statuses in gencoach as in the generator's log,
    plus the coached branch: executed from e0-s1's saved state, continued with the attempt id."""
    scripted_agent.answer = buttons_player("wrong_button")
    log = tmp_path / "run.jsonl"
    options = GenerationOptions(
        agent_url=scripted_agent.url,
        redis_url=redis_url,
        run_id=RUN,
        log_path=log,
        branch_grace_s=60.0,
    )
    report: GenerationReport | None = None

    async def generate() -> None:
        nonlocal report
        report = await run_generation(options)

    hold_settling(redis_client, RUN)  # the run waits for the order published below
    async with anyio.create_task_group() as tg:
        tg.start_soon(generate)
        graph = await until_graph(store, executed("e0-c3"), "e0-s1's wrong candidate")
        right = graph.candidates[by_candidate(graph)["e0-c2"]]
        anchor = await record_coached_nodes(redis_url, graph, right)
        await until_graph(store, lambda g: "coached:c" in by_candidate(g), "the coached nodes")
        anchor_event = {"situation_id": "e0-s1", "input": anchor.input.model_dump(mode="json")}
        assert right.output is not None
        order = branch_order(
            RUN, anchor_event, right.output.model_dump(mode="json"), right.memory, name="coached"
        )
        publish_held(redis_client, order)

    assert report is not None
    assert report.orders_executed == 1
    assert report.settle_timeouts == 0
    tree = Tree.of(read_log(log))
    graph = await until_graph(store, lambda g: g.state != "active", "run.finished applied")
    candidates = by_candidate(graph)
    situations = {s.situation_id: s for s in graph.situations.values()}
    assert set(situations) == {*tree.situations, "coached:s"}
    assert set(candidates) == {*tree.candidates, "coached:c"}
    for situation_id, event in tree.situations.items():
        assert situations[situation_id].parent_candidate_id == event["parent_candidate_id"]
        assert situations[situation_id].coaching_attempt_ids == event["coaching_attempt_ids"]
    for candidate_id, event in tree.executed.items():
        stored = graph.executions[candidates[candidate_id]]
        assert stored.status == event["status"], candidate_id
        end = stored.stage_end.model_dump(exclude_defaults=True) if stored.stage_end else None
        assert end == event["stage_end"]  # the truth (faulty_candidate_id) only when known
    coached_storage = situations["coached:s"].id
    assert (coached_storage, "alternative") in graph.links[candidates["e0-c0"]]

    assert graph.executions[candidates["coached:c"]].status == "ongoing"
    (following,) = tree.children("coached:c")
    assert situations[following].coaching_attempt_ids == [ATTEMPT]
    assert tree.statuses(following) == ["optimal", "finished"]
    assert all(
        graph.candidates[candidates[c]].coaching_attempt_ids == [ATTEMPT]
        for c in tree.members(following)
    )

    states = Keys().teacher_state(RUN)
    saved = {
        situation_id: EpisodeState.model_validate_json(
            redis_client.hget(states, str(situations[situation_id].input.id)) or b""
        )
        for situation_id in ("e0-s1", following)
    }
    assert right.output is not None
    pressed = right.output.tool_calls[0].arguments["id"]
    assert saved[following].world.press_log == [*saved["e0-s1"].world.press_log, pressed]

    async with httpx.AsyncClient(base_url=controller.url) as http:
        summary = (await http.get(f"/v1/runs/{RUN}")).json()
    assert summary["situations"] == len(tree.situations) + 1
    assert summary["candidates"] == len(tree.candidates) + 1
    assert summary["executions"] == len(tree.executed)
    save = wait_for(lambda: _complete(controller.output_dir / RUN), what="the save")
    assert len(save.situations) == len(tree.situations) + 1


def _complete(folder: Path) -> Any:
    try:
        return read_save(folder)
    except Exception:
        return None
