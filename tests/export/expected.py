"""Rows and messages as the chat formats must write them, for the plain coached run."""

from __future__ import annotations

import json
from typing import Any

from tests.support.saved_runs import FEEDBACK

SYSTEM = (
    "You are an agent that controls robots. Answer the user in words, or act by calling "
    "tools; every call names the robot that runs it.\n\n"
    'Attributes: {"known_robots": ["panda"]}\n\n'
    "Rules:\n- press buttons in order"
)
ROBOT = {"type": "string", "description": "name of the robot that runs the call"}
PRESS_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "press_button",
        "description": "Press a button once with the robot.",
        "parameters": {
            "type": "object",
            "properties": {
                "target_robot_name": ROBOT,
                "id": {"type": "string", "description": "id of the button to press"},
            },
            "required": ["target_robot_name", "id"],
        },
    },
}


def press_turn(candidate_id: int, button: str) -> dict[str, Any]:
    """An assistant turn pressing `button`, as the chat formats write it."""
    call = {
        "id": f"call_{candidate_id}_0",
        "type": "function",
        "function": {
            "name": "press_button",
            "arguments": f'{{"target_robot_name": "panda", "id": "{button}"}}',
        },
    }
    return {"role": "assistant", "content": "", "tool_calls": [call]}


def marked(message: dict[str, Any], trainable: bool) -> dict[str, Any]:
    """The message as the chat format writes it: with tinker-cookbook's `trainable`."""
    return {**message, "trainable": trainable}


def feedback(candidate_id: int) -> dict[str, Any]:
    """The tool message answering the press of `candidate_id`."""
    return {
        "role": "tool",
        "tool_call_id": f"call_{candidate_id}_0",
        "name": "press_button",
        "content": FEEDBACK,
    }


def recorded(candidate_id: int, flag: str | None = "none", message: str = "") -> dict[str, Any]:
    """The tool message answering a call of `candidate_id` with the result its execution
    recorded (a call cut by a stage end, or a call after the first)."""
    content = json.dumps({"target_robot_name": "panda", "error_flag": flag, "message": message})
    return {
        "role": "tool",
        "tool_call_id": f"call_{candidate_id}_0",
        "name": "press_button",
        "content": content,
    }
