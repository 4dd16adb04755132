"""Small sources for library tests: saves written with the real save writer, chat files."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gencoach.library import CanonicalDatasetAdapter, DatasetQuery, Trajectory
from gencoach.protocol import RunConfig
from tests.support.saved_runs import candidate, press, run_config, situation, write_run


def coached_save(folder: Path, run_id: str = "run-1", target: str = "sw0-sw4") -> Path:
    """The export tests' coached run (five root-to-leaf paths) as a save."""
    return write_run(folder, config=run_config(run_id, target=target))


def magma_config(run_id: str, target: str) -> RunConfig:
    """A config in MAGMA-GEN's own shape: object task description, no producer."""
    data = run_config(run_id, target=target).model_dump(mode="json")
    data.pop("producer")
    data["task_description"] = {
        "task_description": "press the one button",
        "stages_description": [{"goal_description": "press it", "stage_name": "press"}],
        "coaching_hint": "look at the labels",
    }
    return RunConfig.parse(data)


def magma_save(folder: Path, run_id: str = "magma-1", target: str = "sw7") -> Path:
    """A MAGMA-GEN style save: `finished` candidates with step-summary executions, one as
    MAGMA-GEN writes them (a list of robot statuses, enum values), one with names."""
    summary = {
        "per_robot_status": [
            {"robot_name": "panda", "mess": "pressed", "result": True, "error_flag": "none"}
        ],
        "stage_success": 1,
        "stage_state": 1,
        "tool_calls": 1,
        "forgiven_tool_calls": 0,
        "failure_reason": None,
        "reward": 1.0,
    }
    failed = {
        "per_robot_status": {"panda": {"error_flag": "bad_call", "failure_reason": "no such"}},
        "stage_success": "FAILED",
        "stage_state": "EXCEEDED",
        "tool_calls": 1,
        "failure_reason": "no such button",
    }
    records = [
        situation(
            0,
            None,
            [
                candidate(0, press(target), "finished", execution=summary),
                candidate(1, press("sw99"), "finished", execution=failed),
            ],
            content="press the one button",
        )
    ]
    write_run(folder, records, magma_config(run_id, target))
    return folder


def human_save(folder: Path, run_id: str = "human-1") -> Path:
    """A save whose root answer failed, and a person's correction (a second root) succeeded."""
    fixed = candidate(1, press("sw0"), "optimal", attempts=[4], origin="coaching")
    fixed["coaching"] = {"type_coaching": "failure:diagnosis", "coaching_role": "fixed_node"}
    fixed["coaching_source"] = {
        "request_id": "req-9",
        "origin": "human",
        "diagnosis": "the label says sw0",
    }
    records = [
        situation(0, None, [candidate(0, press("sw9"), "error", faulty=True)], content="press sw0"),
        situation(1, None, [fixed], content="press sw0", input_id=0),
    ]
    write_run(folder, records, run_config(run_id, target="sw0-human", roots=(0, 1)))
    return folder


def chat_row(
    answer: str, *, trainable: bool | None = None, weight: int | None = None, **metadata: Any
) -> dict[str, Any]:
    """A chat row: a user request, a tool call and its result, a final answer."""
    call = {"id": "call_1", "type": "function",
            "function": {"name": "press_button", "arguments": '{"id": "sw1"}'}}  # fmt: skip
    first: dict[str, Any] = {"role": "assistant", "content": "", "tool_calls": [call]}
    if trainable is not None:
        first["trainable"] = trainable
    if weight is not None:
        first["weight"] = weight
    return {
        "messages": [
            {"role": "system", "content": "You control robots."},
            {"role": "user", "content": "press sw1 then say done"},
            first,
            {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
            {"role": "assistant", "content": answer},
        ],
        "tools": [{"type": "function", "function": {"name": "press_button", "parameters": {}}}],
        "metadata": {"scenario": "chat", "target": "sw1", **metadata},
    }


def write_chat(path: Path, rows: Sequence[dict[str, Any] | str]) -> Path:
    """A chat JSONL file of rows (strings are written as they are)."""
    lines = [row if isinstance(row, str) else json.dumps(row) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def trajectories(
    lib: CanonicalDatasetAdapter, query: DatasetQuery | None = None
) -> list[Trajectory]:
    """The parsed trajectories of a query's records."""
    return [record.trajectory for record in lib.iter_records(query)]
