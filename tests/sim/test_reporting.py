"""Events from episodes, and the recorder that sends them to Redis and to a log."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from gencoach.constants import Keys
from gencoach.errors import ContractError
from gencoach.sim import Episode, EpisodeState
from gencoach.sim.reporting import EventSender, execution_record, stage_info
from tests.support.generation_log import read_log
from tests.support.players import act, call
from tests.support.streams import reported_events

STARTED = {
    "agent_url": "http://127.0.0.1:1",
    "scenario": "buttons",
    "target": "t",
    "target_kind": "scenario",
    "task_description": "d",
    "generator": {"name": "gencoach-sim", "version": "0"},
}


def test_execution_is_magma_gen_step_summary_with_the_stage_end() -> None:
    """One status per executed call, then the stage as MAGMA Core's enums: a failure has
    its reason and says how it ended and how many calls were left unexecuted."""
    episode = Episode.start("sorting", 0)
    bins = {o.id: f"{o.colour}_bin" for o in episode.world.objects.values()}
    wrong = next(b for b in ("red_bin", "blue_bin") if b != bins["cube"])
    step = episode.step(
        act(
            call("depose", robot="ur5", target="shelf"),
            call("take_obj", obj="cube"),
            call("depose", target=wrong),
            call("take_obj", obj="ball"),
        )
    )
    record = execution_record(step)
    assert list(record) == [
        "per_robot_status", "stage_success", "stage_state", "tool_calls",
        "forgiven_tool_calls", "failure_reason", "failure_diagnostics", "reward",
    ]  # fmt: skip
    assert record["per_robot_status"] == [
        {"robot_name": "ur5", "mess": "nothing is held", "result": False,
         "error_flag": "bad_call", "mess_is_public": False},
        {"robot_name": "panda", "mess": "", "result": True, "error_flag": "none",
         "mess_is_public": False},
        {"robot_name": "panda", "mess": "", "result": True, "error_flag": "none",
         "mess_is_public": False},
    ]  # fmt: skip
    assert (record["stage_success"], record["stage_state"]) == (-1, 1)
    assert (record["tool_calls"], record["forgiven_tool_calls"]) == (3, 0)
    assert record["failure_reason"] == f"cube was put in {wrong} instead of {bins['cube']}"
    assert record["failure_diagnostics"] == {"event": "failure", "skipped_calls": 1}
    assert record["reward"] is None


def test_an_ongoing_decision_has_no_failure() -> None:
    """A decision that leaves the stage going is `stage_success` 0, with no failure reason;
    its bad call's message is in its robot's status."""
    step = Episode.start("buttons", 0).step(act(call("press_button", id="sw9")))
    record = execution_record(step)
    assert (record["stage_success"], record["failure_reason"]) == (0, None)
    (status,) = record["per_robot_status"]
    assert (status["error_flag"], status["mess"]) == ("bad_call", "unknown button 'sw9'")


def test_a_text_stage_reports_no_tool_budget() -> None:
    """A text-only stage's tool budget of 0 is reported as none (the contract's minimum is 1)."""
    info = stage_info(Episode.start("text_question", 0).stage)
    assert info["text_only"] is True
    assert info["target_tool_calls"] == 0
    assert info["max_tool_calls"] is None


@pytest.mark.asyncio
async def test_a_standalone_recorder_validates_numbers_and_logs(tmp_path: Path) -> None:
    """Without gencoach, events are still validated, numbered from 0 and written in order."""
    log = tmp_path / "run.jsonl"
    async with EventSender("r", log_path=log) as recorder:
        assert not recorder.reports
        assert not recorder.receives_orders
        await recorder.emit("run.started", **STARTED)
        with pytest.raises(ContractError, match="agent_url"):
            await recorder.emit("run.started", **{**STARTED, "agent_url": "ftp://x"})
        await recorder.emit("run.finished", reason="done")
    events = read_log(log)
    assert [(e["type"], e["seq"]) for e in events] == [("run.started", 0), ("run.finished", 1)]


@pytest.mark.asyncio
async def test_a_redis_recorder_streams_in_order_and_saves_states(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """Events reach the stream in emission order, as logged; states are saved per input id."""
    log = tmp_path / "run.jsonl"
    state = Episode.start("buttons", 3).snapshot()
    other = Episode.start("buttons", 4).snapshot()
    async with EventSender("r", redis_url=redis_url, log_path=log) as recorder:
        assert recorder.receives_orders
        await recorder.emit("run.started", **STARTED)
        await recorder.save_state(5, state)
        await recorder.save_state(5, other, keep=True)
        await recorder.emit("run.finished")
        assert redis_client.xlen(Keys().events) == 0  # nothing is sent before a flush
    assert reported_events(redis_client) == read_log(log)
    saved = redis_client.hget(Keys().teacher_state("r"), "5")
    assert saved is not None
    assert EpisodeState.model_validate_json(saved) == state
