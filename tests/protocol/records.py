"""Valid saved-graph records, generation events and branch orders, as fresh decoded JSON."""

from __future__ import annotations

from typing import Any

from tests.protocol.examples import (
    agent_decision,
    agent_input,
    agent_output,
    coaching_error,
    internal_step,
)

Json = dict[str, Any]


# Saved graph


def producer() -> Json:
    return {"package": "gencoach", "version": "0.1.0"}


def stage_description() -> Json:
    return {"goal_description": "the cup is on the table", "instruction": "Serve.",
            "stage_name": "ServeStage", "target_tool_calls": 2}  # fmt: skip


def task_description() -> Json:
    return {"task_description": "Serve the table.", "stages_description": [stage_description()],
            "coaching_hint": None}  # fmt: skip


def run_config() -> Json:
    return {
        "run_id": "run-1",
        "scenario": "kitchen",
        "target": "cup_on_table",
        "target_kind": "task",
        "generator_version": "2.0",
        "export_complete": True,
        "agent_id": "reference-agent",
        "agent_version": "1.0.0",
        "roots": [0],
        "env_options": {"seed": 7},
        "task_description": task_description(),
        "error_statistics": {"bad_call": 2},
        "producer": producer(),
    }


def situation_link() -> Json:
    return {"situation_id": 1, "kind": "next"}


def stage_score(optimal: int = 2, non_optimal: int = 1, unassessed: int = 0) -> Json:
    total = optimal + non_optimal + unassessed
    return {
        "optimal": optimal,
        "non-optimal": non_optimal,
        "unassessed": unassessed,
        "total_child": total,
    }


def coaching_marker() -> Json:
    return {
        "type_coaching": "failure:decision",
        "coaching_role": "fixed_node",
        "diagnosed_as_faulty": False,
        "diagnostic_types": ["failure"],
        "trajectory_diagnostic_applied": True,
    }


def candidate_record(id: int = 10, parent_id: int | None = None) -> Json:
    return {
        "id": id,
        "parent_id": parent_id,
        "stage_id": 2,
        "kind": "agent",
        "response_status": "completed",
        "output": agent_decision(),
        "error": None,
        "internal_steps": [],
        "execution": {"r1": {"error": "none"}},
        "status": "optimal",
        "execution_finished": True,
        "score": {"stage_2": stage_score()},
        "coaching": coaching_marker(),
        "coaching_source": {"origin": "human", "operator": "ana"},
        "coaching_attempt_ids": [3],
        "origin": "coaching",
        "links": [situation_link(), {"situation_id": 2, "kind": "alternative"}],
    }


def situation_record() -> Json:
    return {
        "id": 0,
        "stage_id": 2,
        "parent_id": None,
        "input": agent_input(),
        "candidates": [candidate_record(10), candidate_record(11)],
    }


# Generation events and branch orders


def stage_info() -> Json:
    return {
        "id": 2,
        "goal": "Put the cup on the table",
        "hint": "grasp first",
        "text_only": False,
        "target_tool_calls": 2,
        "max_tool_calls": 4,
        "linked_to_prev": True,
    }


def run_started() -> Json:
    return {
        "type": "run.started",
        "run_id": "run-1",
        "seq": 0,
        "events": "1",
        "agent_url": "http://127.0.0.1:8080",
        "scenario": "kitchen",
        "target": "cup_on_table",
        "target_kind": "task",
        "task_description": "Serve the table.",
        "env_options": {"seed": 7},
        "generator": {"name": "gencoach-sim", "version": "0.1.0"},
    }


def situation_created() -> Json:
    return {
        "type": "situation.created",
        "run_id": "run-1",
        "seq": 1,
        "situation_id": "s-1",
        "parent_candidate_id": None,
        "link": "next",
        "stage": stage_info(),
        "input": agent_input(),
        "active_errors": [coaching_error()],
        "coaching_attempt_ids": [],
    }


def candidate_created() -> Json:
    return {
        "type": "candidate.created",
        "run_id": "run-1",
        "seq": 2,
        "candidate_id": "c-1",
        "situation_id": "s-1",
        "kind": "agent",
        "response_status": "completed",
        "output": agent_decision(),
        "error": None,
        "memory": {"history": []},
        "internal_steps": [internal_step()],
        "invalid_reason": None,
        "origin": "model",
        "coaching_attempt_ids": [],
    }


def candidate_executed() -> Json:
    return {
        "type": "candidate.executed",
        "run_id": "run-1",
        "seq": 3,
        "candidate_id": "c-1",
        "execution": {"r1": {"error": "bad_call", "tool_calls": 1, "failure_reason": "no mug"}},
        "status": "finished",
        "stage_end": {"event": "success", "state": "optimal"},
    }


def run_finished() -> Json:
    return {"type": "run.finished", "run_id": "run-1", "seq": 4, "reason": None}


def run_settled() -> Json:
    return {"type": "run.settled", "run_id": "run-1", "through_seq": 57}


def branch_order() -> Json:
    return {
        "type": "branch.order",
        "branch_id": "b-1",
        "run_id": "run-1",
        "anchor": {"kind": "replacement", "situation_id": "s-1"},
        "situation_id": "s-1#coached-3",
        "candidate_id": "c-1#coached-3",
        "input": agent_input(),
        "candidate": agent_output(),
        "coaching": coaching_marker(),
        "attempt_id": 3,
    }
