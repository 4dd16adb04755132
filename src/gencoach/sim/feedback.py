"""The environment feedback the agent reads after a decision was executed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gencoach.sim.tools import ToolResult


def env_feedback(results: Sequence[ToolResult]) -> dict[str, Any]:
    """Build `{"infos", "previous_tool_call", "failure_reason"}` from one decision's results.

    `infos` holds the feedback lines, one per executed call; `previous_tool_call` the calls
    as executed (with the robot that ran them); `failure_reason` the failed calls' messages,
    each prefixed by its robot, or None when every call succeeded. An injected failure
    shows only its message, never that it was injected.
    """
    failures = [f"{r.robot}: {r.message}" for r in results if not r.result]
    return {
        "infos": "\n".join(r.feedback_text for r in results),
        "previous_tool_call": [
            {"name": r.tool, "arguments": dict(r.arguments), "target_robot_name": r.robot}
            for r in results
        ],
        "failure_reason": "; ".join(failures) if failures else None,
    }
