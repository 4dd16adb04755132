"""A bad call that spent its stage's budget, recovered from the state after it: the whole
loop on the reference world, with the generator, a real controller and its workers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import redis

from gencoach.graph import REQUESTS_FILE
from gencoach.graph.audit import audit
from gencoach.protocol import RECOVERY_POINT, REPLACEMENT_POINT
from gencoach.service.store.trajectory import RECOVERY_INPUT_BASE
from gencoach.sim import EpisodeState
from gencoach.sim.generator import run_generation
from gencoach.sim.options import GenerationOptions
from tests.sim.orders import saved_state
from tests.support.agent_server import ScriptedAgent
from tests.support.coaching import coaching_settings, complete_save
from tests.support.controller import ControllerProcess
from tests.support.llm_server import json_reply, scripted_llm_servers
from tests.support.players import BUTTONS_TASK, MISTAKES, act, call
from tests.support.saves import assert_audit_clean

pytestmark = [pytest.mark.slow, pytest.mark.asyncio, pytest.mark.timeout(150)]

RUN = "recovery"

Json = dict[str, Any]


def spend_the_budget(item: Json, index: int) -> Json:
    """Press the first button twice, then call a robot that does not exist until the stage's
    six calls are spent; a reinjected input gets its correction."""
    memory = dict(item["memory"])
    if item["instruction"]["type"] == "user":
        found = BUTTONS_TASK.search(item["instruction"]["content"])
        assert found is not None
        first, second = found.groups()
        memory = {"sequence": [first, first, second], "done": 0}
    coaching = item.get("extra_keys", {}).get("coaching")
    if coaching is not None:
        return {"output": coaching["decision"], "memory": memory}
    sequence, done = memory["sequence"], memory["done"]
    if done < 2:
        memory["done"] = done + 1
        return {"output": act(call("press_button", id=sequence[done])), "memory": memory}
    return {"output": MISTAKES["unknown_robot"](sequence, done), "memory": memory}


def recover(request: Json) -> tuple[int, Json]:
    """The agent's repair: press the last button of the sequence, at `recovery`."""
    (first_step, *_) = request["trajectory"]
    found = BUTTONS_TASK.search(first_step["input"]["instruction"]["content"])
    assert found is not None
    decision = act(call("press_button", id=found.group(2)))
    proposal = {
        "reinjection_point_id": RECOVERY_POINT,
        "extra_keys": {"kind": "replace_decision", "decision": decision},
    }
    return 200, {
        "request_id": request["request_id"],
        "status": "corrected",
        "proposals": [proposal],
        "logs": [],
        "reason": None,
    }


async def test_a_stage_ending_bad_call_is_recovered_from_the_state_after_it(
    scripted_agent: ScriptedAgent,
    redis_url: str,
    redis_client: redis.Redis,
    tmp_path: Path,
) -> None:
    """The sixth call of a six-call stage is a bad call, and the diagnosis blames it. As
    MAGMA-GEN does, the repair is offered `recovery` at a situation built from the terminal
    status; the generator restores the state after that call (its budget spent), the
    corrected press ends the stage in success, and the attempt is proven."""
    scripted_agent.answer = spend_the_budget
    scripted_agent.coaching_replies.append(recover)
    with scripted_llm_servers() as start:
        llm = start()
        llm.script(json_reply({"decision_index": 6, "reason": "no such robot",
                               "expected_decision": None}))  # fmt: skip
        settings = coaching_settings(llm, format=False, suboptimal=False, text_rewrite=False)
        controller = ControllerProcess(tmp_path, redis_url, settings=settings)
        controller.start()
        controller.start_workers()
        try:
            options = GenerationOptions(
                agent_url=scripted_agent.url,
                redis_url=redis_url,
                run_id=RUN,
                branches=1,
                branch_grace_s=60.0,  # a bound: the run ends on gencoach's settled answer
                max_wall_s=100.0,
            )
            report = await run_generation(options)
            save = complete_save(controller, RUN)
        finally:
            controller.stop()

    assert (report.orders_executed, report.orders_skipped, report.settle_timeouts) == (1, 0, 0)
    requests = json.loads((save.folder / REQUESTS_FILE).read_text())["requests"]
    # The coached branch's success beyond the target opens a request the routes skip.
    (request,) = [r for r in requests if r["route"] == "exceeded"]
    assert request["state"] == "proven", request
    assert request["offered_points"] == [REPLACEMENT_POINT, RECOVERY_POINT]
    (asked,) = scripted_agent.coaching_requests
    terminal = asked["trajectory"][-1]
    recovery = next(p for p in asked["reinjection_points"] if p["id"] == RECOVERY_POINT)
    built = recovery["input"]
    assert built["id"] >= RECOVERY_INPUT_BASE
    # It reads what the generator reported the agent would read after that call: the
    # environment's feedback, as after any other call (MAGMA-GEN's status return).
    assert built["instruction"]["type"] == "env"
    feedback = json.loads(built["instruction"]["content"])
    assert set(feedback) == {"infos", "previous_tool_call", "failure_reason"}
    assert feedback["failure_reason"], feedback
    assert feedback["previous_tool_call"] == terminal["output"]["tool_calls"]
    assert built["memory"]["done"] == 2
    assert "coaching" not in built["extra_keys"]
    # The branch restarts from the state after the bad call: two presses, six calls spent.
    state: EpisodeState = saved_state(redis_client, built["id"], RUN)
    assert len(state.world.press_log) == 2
    assert (state.tracker.used_tool_calls, state.tracker.finished) == (6, False)

    coached = next(c for c in save.candidates.values() if c.origin == "coaching")
    assert coached.coaching.coaching_role == "recovery_node"
    bad = next(c for c in save.candidates.values() if c.id == request["diagnosis"]["step_id"])
    assert save.situations[save.candidate_situation[coached.id]].parent_id == bad.id
    assert coached.score["stage_0"].non_optimal == 1
    assert assert_audit_clean(save.folder).recovery_nodes == 1
    # The audit names a save whose request was offered replacement alone there.
    held_back = tmp_path / "held-back"
    shutil.copytree(save.folder, held_back)
    saved = json.loads((held_back / REQUESTS_FILE).read_text())
    for entry in saved["requests"]:
        entry["offered_points"] = [REPLACEMENT_POINT]
    (held_back / REQUESTS_FILE).write_text(json.dumps(saved))
    (violation,) = [v for v in audit([held_back]).violations if v.rule == "recovery"]
    assert violation.message == (
        f"request {request['request_id']} blamed candidate {bad.id}, a single bad call "
        "that ended its stage, but was offered only ['replacement']"
    )
