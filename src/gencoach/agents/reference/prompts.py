"""The prompt the reference coach sends a session backend to get a corrected decision."""

from __future__ import annotations

import json

from gencoach.protocol import AgentDecision, SpecializedCoachingRequest
from gencoach.protocol.decision_text import format_decision
from gencoach.workers.backends import ChatMessage

SYSTEM = (
    "You repair one decision of a robot agent acting on a tabletop. Answer with only a "
    'JSON object {"say": string, "tool_calls": [{"name": string, "arguments": object, '
    '"target_robot_name": string}]}: tool calls to act (say empty), or say alone to answer '
    "a question (no tool calls), never both. Use only the tools listed."
)


def _decision(decision: AgentDecision | None) -> str:
    if decision is None:
        return "(no decision)"
    return format_decision(decision) or "(an empty decision)"


def repair_messages(request: SpecializedCoachingRequest) -> list[ChatMessage]:
    """The chat asking for the corrected decision of the request's target step."""
    target = next(step for step in request.trajectory if step.id == request.target_step_id)
    lines = [
        f"Kind of problem: {request.kind}",
        f"Stage goal: {request.stage.goal}",
    ]
    if request.stage.hint:
        lines.append(f"Hint: {request.stage.hint}")
    lines += [f"Active error: {error.description}" for error in request.active_errors]
    if request.diagnosis is not None:
        lines.append(f"Diagnosis: {request.diagnosis.explanation}")
        if request.diagnosis.expected_decision:
            lines.append(f"Expected decision: {request.diagnosis.expected_decision}")
    if request.additional_info:
        lines.append(f"Additional information: {json.dumps(request.additional_info)}")
    tools = [tool.get("name") for tool in target.input.tools]
    lines += [
        f"Tools: {json.dumps(target.input.tools)}" if tools else "Tools: none",
        f"World (JSON): {json.dumps(target.input.attributes)}",
        "Trajectory:",
    ]
    for step in request.trajectory:
        marker = "  <- the decision to replace" if step.id == request.target_step_id else ""
        lines.append(
            f"- step {step.id} [{step.input.instruction.type}] {step.input.instruction.content}"
        )
        lines.append(f"  decision: {_decision(step.output)}{marker}")
        if step.error is not None:
            lines.append(f"  error: {step.error.code}: {step.error.message}")
        if step.execution:
            lines.append(f"  execution: {json.dumps(step.execution)}")
    lines.append(f"Give the decision that should replace step {target.id}'s, as JSON.")
    return [ChatMessage.system(SYSTEM), ChatMessage.user("\n".join(lines))]
