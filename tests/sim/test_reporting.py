"""Events from episodes, and the recorder that sends them to Redis and to a log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from gencoach.constants import EVENT_FIELD, Keys
from gencoach.errors import ContractError
from gencoach.sim import Episode, EpisodeState
from gencoach.sim.reporting import Recorder, execution_record, stage_info
from tests.sim.events import read_log
from tests.sim.players import act, call

STARTED = {
    "agent_url": "http://127.0.0.1:1",
    "scenario": "buttons",
    "target": "t",
    "target_kind": "scenario",
    "task_description": "d",
    "generator": {"name": "gencoach-sim", "version": "0"},
}


def test_execution_groups_calls_by_robot_and_adds_the_stage_end() -> None:
    """Each robot lists its calls and results, flag and failures; a stage end adds `stage`."""
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
    assert list(record) == ["ur5", "panda", "stage"]
    assert record["ur5"]["error_flag"] == "bad_call"
    assert record["ur5"]["failure_reason"] == "nothing is held"
    assert record["panda"]["error_flag"] == "none"
    assert [r["result"] for r in record["panda"]["results"]] == [True, True]
    assert [c["name"] for c in record["panda"]["tool_calls"]] == ["take_obj", "depose"]
    assert record["stage"] == {
        "event": "failure",
        "state": "optimal",
        "failure_reason": f"cube was put in {wrong} instead of {bins['cube']}",
        "skipped_calls": 1,
    }


def test_an_ongoing_decision_has_no_stage_entry() -> None:
    """A decision that leaves the stage going reports robots only."""
    step = Episode.start("buttons", 0).step(act(call("press_button", id="sw9")))
    record = execution_record(step)
    assert list(record) == ["panda"]
    assert record["panda"]["failure_reason"] == "unknown button 'sw9'"


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
    async with Recorder("r", log_path=log) as recorder:
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
    async with Recorder("r", redis_url=redis_url, log_path=log) as recorder:
        assert recorder.receives_orders
        await recorder.emit("run.started", **STARTED)
        await recorder.save_state(5, state)
        await recorder.save_state(5, other, keep=True)
        await recorder.emit("run.finished")
        assert redis_client.xlen(Keys().events) == 0  # nothing is sent before a flush
    entries = redis_client.xrange(Keys().events)
    streamed = [json.loads(fields[EVENT_FIELD.encode()]) for _, fields in entries]
    assert streamed == read_log(log)
    saved = redis_client.hget(Keys().sim_states("r"), "5")
    assert saved is not None
    assert EpisodeState.model_validate_json(saved) == state
