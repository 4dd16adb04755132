"""Valid agent, coaching and LLM payloads in protocol 2.0's shapes, and the refusal check."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gencoach.errors import ContractError

Json = dict[str, Any]


def expect_refusal(call: Callable[[], object], field: str) -> ContractError:
    """Run `call`, require a ContractError that names `field`, and return it."""
    with pytest.raises(ContractError) as caught:
        call()
    error = caught.value
    assert field in error.fields, error.fields
    assert field in str(error)
    return error


# Agent protocol 2.0


def agent_input(id: int = 1, num_outputs: int = 1) -> Json:
    return {
        "id": id,
        "instruction": {"type": "user", "content": "Bring the red cup to the table."},
        "tools": [{"name": "move", "parameters": {"target": {"type": "string"}}}],
        "attributes": {"room": "kitchen", "objects": ["cup", "table"]},
        "memory": {"history": [{"role": "user", "content": "hello"}], "confidence": 0.5},
        "num_outputs": num_outputs,
        "extra_keys": {},
    }


def agent_request() -> Json:
    return {"request_id": "req-1", "inputs": [agent_input(1, 2), agent_input(2)]}


def tool_call() -> Json:
    return {"name": "move", "arguments": {"target": "table"}, "target_robot_name": "r1"}


def agent_decision() -> Json:
    return {"say": "On my way.", "tool_calls": [tool_call()]}


def agent_error() -> Json:
    return {"code": "timeout", "message": "the model did not answer", "component": "planner"}


def agent_output(source_id: int = 1, candidate_index: int = 0, request_id: str = "req-1") -> Json:
    return {
        "request_id": request_id,
        "source_id": source_id,
        "candidate_index": candidate_index,
        "status": "completed",
        "memory": {"history": []},
        "internal_steps": [{"id": "s1", "component": "planner"}],
        "output": agent_decision(),
        "error": None,
    }


def failed_output(source_id: int = 1, candidate_index: int = 0) -> Json:
    output = agent_output(source_id, candidate_index)
    return {**output, "status": "error", "output": None, "error": agent_error()}


def agent_response() -> list[Json]:
    return [agent_output(1, 0), failed_output(1, 1), agent_output(2, 0)]


def agent_health() -> Json:
    return {"status": "ready"}


def agent_info() -> Json:
    return {
        "protocol_version": "2.0",
        "agent_id": "reference-agent",
        "agent_version": "1.0.0",
        "specialized_coaching": ["format", "failure", "suboptimal"],
        "coaching_resume": True,
        "coaching_unavailable_reason": None,
        "capabilities": {"tools": True, "vision": False},
    }


# Coaching


def internal_step() -> Json:
    return {
        "id": "s1",
        "component": "planner",
        "origin": "model",
        "full_prompt": "You are a robot…",
        "input_elements": {"goal": "cup"},
        "output_raw": '{"say": "ok"}',
    }


def coaching_stage() -> Json:
    return {"id": 2, "goal": "Put the cup on the table", "hint": None}


def coaching_error() -> Json:
    return {"code": "bad_call", "description": "unknown object", "details": {"object": "mug"}}


def coaching_diagnosis() -> Json:
    return {"explanation": "It moved before grasping.", "expected_decision": "grasp the cup"}


def coaching_step(id: int = 1) -> Json:
    return {
        "id": id,
        "input": agent_input(id),
        "output": agent_decision(),
        "error": None,
        "internal_steps": [internal_step()],
        "execution": {"r1": {"error": "none", "tool_calls": 1}},
    }


def reinjection_point(id: str = "replacement", step: int = 1) -> Json:
    return {"id": id, "input_step_id": step}


def backend_config() -> Json:
    return {
        "type": "ollama",
        "endpoint": "http://127.0.0.1:11434/v1/chat/completions",
        "default_model": "qwen2.5",
        "headers": {"Content-type": "application/json", "Authorization": "Bearer sk-secret"},
        "timeout": 30.0,
        "max_retry": 3,
    }


def session_config() -> Json:
    return {"backends": {"main": backend_config()}, "capture_logs": True}


def coaching_log() -> Json:
    return {"coaching_type": "failure_diagnosis", "content": "# Diagnosis\n…"}


def coaching_request() -> Json:
    return {
        "run_id": "run-1",
        "request_id": "coach-1",
        "kind": "failure",
        "stage": coaching_stage(),
        "active_errors": [coaching_error()],
        "diagnosis": coaching_diagnosis(),
        "target_step_id": 2,
        "trajectory": [coaching_step(1), coaching_step(2)],
        "reinjection_points": [
            reinjection_point("replacement", 2),
            {"id": "recovery", "input": agent_input(3)},
        ],
        "additional_info": {},
    }


def coaching_proposal(point: str = "replacement") -> Json:
    return {"reinjection_point_id": point, "extra_keys": replace_say()}


def coaching_response() -> Json:
    return {
        "logs": [coaching_log()],
        "request_id": "coach-1",
        "status": "corrected",
        "proposals": [coaching_proposal()],
        "reason": None,
    }


def replace_say() -> Json:
    return {"kind": "replace_say", "text": "I will grasp the cup first."}


def replace_decision() -> Json:
    return {"kind": "replace_decision", "decision": agent_decision()}


# LLM answers


def failure_diagnosis() -> Json:
    return {"decision_index": 2, "reason": "moved too early", "expected_decision": {"say": "grasp"}}


def suboptimal_diagnosis() -> Json:
    return {"suboptimal": True, "decision_idx": 1, "reason": "looked twice"}


def case_selection() -> list[int]:
    return [1, 3]
