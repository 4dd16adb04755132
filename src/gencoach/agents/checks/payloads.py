"""What the checker sends: reference-world inputs, a tiny trajectory, session configs.

The inputs look like the reference generator's (a stage instruction, the tabletop's
attributes and tools, feedback JSON), so an agent has something sensible to answer.
"""

from __future__ import annotations

import json
from typing import Any

from gencoach.protocol import (
    RECOVERY_POINT,
    REPLACEMENT_POINT,
    CoachingKind,
)
from gencoach.sim import tabletop, tool_specs

Json = dict[str, Any]

FIRST_TASK = "Press sw1 twice, then sw2."
OTHER_TASK = "Press sw3 twice, then sw4."
STUB_DECISION: Json = {
    "say": "",
    "tool_calls": [
        {"name": "press_button", "arguments": {"id": "sw1"}, "target_robot_name": "panda"}
    ],
}


def feedback(call: Json, failure: str | None = None) -> str:
    """Feedback JSON for one executed call, as the reference simulator writes it."""
    robot, tool = call["target_robot_name"], call["name"]
    info = (
        f"{robot}: {tool} succeed"
        if failure is None
        else f"{robot}: {tool} failed with message: {failure}"
    )
    return json.dumps(
        {
            "infos": info,
            "previous_tool_call": [call],
            "failure_reason": None if failure is None else f"{robot}: {failure}",
        }
    )


def press(button: str) -> Json:
    """A decision's tool call pressing one button with panda."""
    return {"name": "press_button", "arguments": {"id": button}, "target_robot_name": "panda"}


def agent_input(
    input_id: int,
    content: str,
    *,
    kind: str = "user",
    memory: Json | None = None,
    num_outputs: int = 1,
    extra_keys: Json | None = None,
) -> dict[str, Any]:
    """One input on the reference tabletop."""
    return {
        "id": input_id,
        "instruction": {"type": kind, "content": content},
        "tools": tool_specs(),
        "attributes": tabletop(0).attributes(),
        "memory": memory or {},
        "num_outputs": num_outputs,
        "extra_keys": extra_keys or {},
    }


def session_config(endpoint: str, model: str = "checker-model") -> Json:
    """A session with one `ollama` backend at `endpoint`."""
    backend: Json = {
        "type": "ollama",
        "endpoint": endpoint,
        "default_model": model,
        "headers": {"Content-type": "application/json"},
        "timeout": 30.0,
        "max_retry": 1,
    }
    return {"backends": {"checker": backend}, "capture_logs": True}


def coaching_request(kind: CoachingKind, run_id: str, request_id: str, memory: Json) -> Json:
    """A coaching request on a two-step trajectory whose second decision went wrong."""
    first = agent_input(1, FIRST_TASK, memory={})
    second = agent_input(2, feedback(press("sw1")), kind="env", memory=memory)
    bad = press("sw9")
    steps = {
        "failure": ({"say": "", "tool_calls": [bad]}, None),
        "suboptimal": (
            {"say": "", "tool_calls": [{**bad, "name": "cancel_current_action", "arguments": {}}]},
            None,
        ),
        "format": (None, {"code": "malformed_output", "message": "words and a tool call together"}),
    }
    output, error = steps[kind]
    failure = "unknown button 'sw9'" if kind == "failure" else None
    execution: Json = (
        {} if output is None else {"panda": {"error_flag": "bad_call" if failure else "none"}}
    )
    request: Json = {
        "run_id": run_id,
        "request_id": request_id,
        "kind": kind,
        "stage": {"id": 0, "goal": "sw1, sw1 then sw2 are pressed", "hint": "Press sw1, sw1, sw2."},
        "active_errors": [],
        "diagnosis": None,
        "target_step_id": 2,
        "trajectory": [
            {
                "id": 1,
                "input": first,
                "output": {"say": "", "tool_calls": [press("sw1")]},
                "execution": {"panda": {"error_flag": "none"}},
            },
            {"id": 2, "input": second, "output": output, "error": error, "execution": execution},
        ],
        "reinjection_points": [{"id": REPLACEMENT_POINT, "input_step_id": 2}],
        "additional_info": {},
    }
    if kind != "format":
        explanation = "sw9 does not exist" if kind == "failure" else "cancelling was needless"
        request["diagnosis"] = {
            "explanation": explanation,
            "expected_decision": 'panda.press_button(id="sw1")',
        }
    if failure is not None:
        recovery = agent_input(3, feedback(bad, failure), kind="env", memory=memory)
        request["reinjection_points"] = [
            {"id": REPLACEMENT_POINT, "input_step_id": 2},
            {"id": RECOVERY_POINT, "input": recovery},
        ]
    return request
