"""A known run reported through the stream or HTTP is saved field by field as expected."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from gencoach.graph import read_save
from gencoach.reporting.client import Reporter
from tests.support.controller import ControllerProcess, wait_for
from tests.support.graphs import EXPECTED_SCORES, EXPECTED_STATUSES, known_run_events

pytestmark = pytest.mark.slow


def _report(reporter: Reporter) -> None:
    for event_type, fields in known_run_events():
        reporter.emit(event_type, **fields)
    reporter.flush()


def _saved(controller: ControllerProcess, run_id: str) -> Path:
    folder = controller.output_dir / run_id

    def complete() -> bool:
        config = folder / "config.json"
        return config.is_file() and json.loads(config.read_text())["export_complete"] is True

    wait_for(complete, what=f"the save of {run_id}")
    return folder


def _load(folder: Path, name: str) -> Any:
    return json.loads((folder / name).read_text())


def _assert_known_save(folder: Path, run_id: str) -> None:
    config = _load(folder, "config.json")
    assert config["run_id"] == run_id
    assert (config["scenario"], config["target"], config["target_kind"]) == (
        "buttons",
        "sw0-sw4",
        "button_sequence",
    )
    assert config["generator_version"] == "2.0"
    assert config["export_complete"] is True
    assert config["roots"] == [0]
    assert config["env_options"] == {"seed": 7}
    # The generator reported the text alone: each stage is described from its situations.
    assert config["task_description"] == {
        "task_description": "press sw0, then sw4; then say done",
        "stages_description": [
            {"goal_description": "press sw0 then sw4", "instruction": "press sw0, then sw4",
             "stage_name": "stage_0", "target_tool_calls": 2, "max_tool_calls": 4,
             "linked_to_prev": False, "text_only": False, "request_type": "unknown"},
            {"goal_description": "say done", "instruction": "now say done",
             "stage_name": "stage_1", "target_tool_calls": None, "max_tool_calls": None,
             "linked_to_prev": True, "text_only": False, "request_type": "unknown"},
        ],
        "coaching_hint": None,
    }  # fmt: skip
    assert config["producer"]["package"] == "gencoach"
    assert config["single_agent"] is False  # run.started did not say it
    assert abs(config["producer"]["started_at"] - time.time()) < 600  # the run's start
    assert config["error_statistics"] == {
        "active_errors": {"injection_error": 1},
        "invalid_answers": 1,
    }
    situations = {sid: _load(folder, f"{sid}.json") for sid in range(5)}
    assert not (folder / "5.json").exists()
    assert [situations[sid]["parent_id"] for sid in range(5)] == [None, 0, 2, 5, 0]
    assert [situations[sid]["stage_id"] for sid in range(5)] == [0, 0, 1, 1, 0]
    assert situations[0]["input"]["instruction"] == {
        "type": "user",
        "content": "press sw0, then sw4",
    }
    candidates = {c["id"]: c for s in situations.values() for c in s["candidates"]}
    assert sorted(candidates) == list(range(8))
    for cid, score in EXPECTED_SCORES.items():
        assert candidates[cid]["score"] == score, f"score of candidate {cid}"
    for cid, status in EXPECTED_STATUSES.items():
        assert candidates[cid]["status"] == status, f"status of candidate {cid}"
    c1 = candidates[0]
    assert c1["links"] == [
        {"situation_id": 1, "kind": "next"},
        {"situation_id": 4, "kind": "alternative"},
    ]
    assert c1["parent_id"] is None
    assert c1["execution"]["panda"]["error_flag"] == "none"
    assert c1["execution_finished"] is True
    invalid = candidates[1]
    assert (invalid["status"], invalid["execution_finished"]) == ("invalid", False)
    assert (c1["origin"], c1["kind"], c1["response_status"]) == ("model", "agent", "completed")
    invalid = candidates[1]
    assert invalid["response_status"] == "error"
    assert invalid["output"] is None
    assert invalid["error"]["code"] == "invalid_response"
    assert "must not both say" in invalid["error"]["message"]
    failed = candidates[3]
    assert failed["execution"]["panda"]["failure_reason"] == "wrong button sw9"
    assert failed["parent_id"] == 0
    coached = candidates[7]
    assert coached["origin"] == "coaching"
    assert coached["coaching_attempt_ids"] == [1]
    assert coached["coaching"] == {
        "type_coaching": None,
        "coaching_role": None,
        "diagnosed_as_faulty": False,
        "diagnostic_types": [],
        "trajectory_diagnostic_applied": False,
    }
    assert read_save(folder).config.run_id == run_id


def test_known_run_through_the_stream_is_saved(
    controller: ControllerProcess, redis_url: str
) -> None:
    """Events published on the stream become a save with every field and score as worked out."""
    with Reporter("stream-run", redis_url=redis_url, batch_size=5) as reporter:
        _report(reporter)
    _assert_known_save(_saved(controller, "stream-run"), "stream-run")


def test_known_run_through_http_is_saved(controller: ControllerProcess) -> None:
    """Events posted to the HTTP API become the same save as through the stream."""
    with Reporter("http-run", api_url=controller.url, batch_size=7) as reporter:
        _report(reporter)
    _assert_known_save(_saved(controller, "http-run"), "http-run")


def test_save_command_writes_a_run_still_going(
    controller: ControllerProcess, redis_url: str
) -> None:
    """`gencoach save RUN_ID` writes a complete save of a run that has not finished."""
    with Reporter("going", redis_url=redis_url) as reporter:
        for event_type, fields in known_run_events()[:-1]:
            reporter.emit(event_type, **fields)
    wait_for(
        lambda: httpx.get(f"{controller.url}/v1/runs/going").json().get("executions") == 8,
        what="the run's events applied",
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "gencoach",
            "--config",
            str(controller.config_path),
            "save",
            "going",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    folder = Path(result.stdout.strip())
    assert read_save(folder).config.run_id == "going"
    assert httpx.get(f"{controller.url}/v1/runs/going").json()["state"] == "active"
    unknown = subprocess.run(
        [sys.executable, "-m", "gencoach", "--config", str(controller.config_path), "save", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert unknown.returncode == 1
    assert "unknown run 'nope'" in unknown.stderr
