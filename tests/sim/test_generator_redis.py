"""The generator reporting through Redis: the stream, the saved states, the branch orders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
import redis

from gencoach.sim.generator import run_generation
from gencoach.sim.options import GenerationOptions, GenerationReport
from tests.sim.orders import branch_order, find_event, publish, saved_state, streamed_events
from tests.support.agent_server import ScriptedAgent
from tests.support.generation_log import Tree, read_log
from tests.support.players import buttons_player

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(30)]

Json = dict[str, Any]


def options(agent: ScriptedAgent, redis_url: str, log: Path, **changes: Any) -> GenerationOptions:
    """Options reporting run `r` through the test Redis, also logging to `log`."""
    settings: dict[str, Any] = {"branch_grace_s": 0.3, **changes}
    return GenerationOptions(
        agent_url=agent.url, redis_url=redis_url, run_id="r", log_path=log, **settings
    )


async def wait_event(client: redis.Redis, kind: str, **fields: Any) -> Json:
    """Wait (10 s at most) for run `r` to stream an event of this type with these fields."""
    with anyio.fail_after(10):
        while True:
            event = find_event(client, "r", kind, **fields)
            if event is not None:
                return event
            await anyio.sleep(0.05)


async def test_the_stream_matches_the_log_and_every_situation_has_its_state(
    scripted_agent: ScriptedAgent, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """Every event reaches the stream as logged; each situation's state is the world it showed."""
    scripted_agent.answer = buttons_player("wrong_button")
    log = tmp_path / "run.jsonl"
    await run_generation(options(scripted_agent, redis_url, log))
    events = read_log(log)
    assert streamed_events(redis_client, "r") == events
    tree = Tree.of(events)
    presses = [
        len(saved_state(redis_client, s["input"]["id"]).world.press_log)
        for s in tree.situations.values()
    ]
    assert presses == [0, 1, 2]
    for situation in tree.situations.values():
        state = saved_state(redis_client, situation["input"]["id"])
        assert state.world.attributes() == situation["input"]["attributes"]


async def test_an_order_for_an_unknown_anchor_is_skipped(
    scripted_agent: ScriptedAgent, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """An order naming a situation this run never had is logged and skipped; the run still ends."""
    scripted_agent.answer = buttons_player(None)
    anchor = {
        "situation_id": "nowhere",
        "input": {"id": 99, "instruction": {"type": "user", "content": "x"}},
    }
    publish(redis_client, branch_order("r", anchor, {"say": "", "tool_calls": []}, {}))
    report = await run_generation(options(scripted_agent, redis_url, tmp_path / "run.jsonl"))
    assert report.orders_skipped == 1
    assert report.orders_executed == 0
    assert report.finish_reason == "every branch ended"


async def run_with_order(
    agent: ScriptedAgent, redis_url: str, client: redis.Redis, log: Path, kind: str
) -> GenerationReport:
    """Run `r`, and once e0-s1's wrong candidate is executed, order its correction twice."""
    report: GenerationReport | None = None

    async def generate() -> None:
        nonlocal report
        report = await run_generation(options(agent, redis_url, log, branch_grace_s=2.0))

    async with anyio.create_task_group() as tg:
        tg.start_soon(generate)
        await wait_event(client, "candidate.executed", candidate_id="e0-c3")
        anchor = await wait_event(client, "situation.created", situation_id="e0-s1")
        right = await wait_event(client, "candidate.created", candidate_id="e0-c2")
        order = branch_order("r", anchor, right["output"], right["memory"], kind=kind)
        publish(client, order)
        publish(client, order)  # a repeated order is executed once
    assert report is not None
    return report


@pytest.mark.parametrize("kind", ["replacement", "recovery"])
async def test_a_branch_order_restores_its_anchor_and_continues(
    scripted_agent: ScriptedAgent,
    redis_url: str,
    redis_client: redis.Redis,
    tmp_path: Path,
    kind: str,
) -> None:
    """The coached decision runs on the anchor's state; the branch goes on with the attempt id;
    the summary counts it as coached, apart from the candidates the agent was asked for."""
    scripted_agent.answer = buttons_player("wrong_button")
    log = tmp_path / "run.jsonl"
    report = await run_with_order(scripted_agent, redis_url, redis_client, log, kind)
    assert report.orders_executed == 1
    # The order's candidate is counted as coached, apart from the candidates asked.
    assert report.answers.coached == 1
    assert report.candidates == len(scripted_agent.response_requests) * 2
    assert "candidates asked, 1 coached" in report.summary()
    tree = Tree.of(read_log(log))
    assert "coached:s" not in tree.situations  # gencoach records the coached nodes
    assert "coached:c" not in tree.candidates
    executed = tree.executed["coached:c"]
    assert executed["status"] == "ongoing"
    (status,) = executed["execution"]["per_robot_status"]
    assert (status["robot_name"], status["error_flag"]) == ("panda", "none")
    (following,) = tree.children("coached:c")
    situation = tree.situations[following]
    assert situation["coaching_attempt_ids"] == [7]
    assert situation["input"]["memory"]["done"] == 2
    anchor_state = saved_state(redis_client, tree.situations["e0-s1"]["input"]["id"])
    state = saved_state(redis_client, situation["input"]["id"])
    pressed = tree.candidates["e0-c2"]["output"]["tool_calls"][0]["arguments"]["id"]
    assert state.world.press_log == [*anchor_state.world.press_log, pressed]
    assert all(tree.candidates[c]["coaching_attempt_ids"] == [7] for c in tree.members(following))
    assert tree.statuses(following) == ["optimal", "finished"]
    assert tree.events[-1]["type"] == "run.finished"
