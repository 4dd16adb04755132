"""What the agent asks for: tool calls and decisions, parsed from plain dicts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field, ValidationError

from gencoach.errors import ContractError, ContractViolation
from gencoach.sim.world import StateModel


class ToolCall(StateModel):
    """One tool call: `{name, arguments, target_robot_name}` as in an AgentDecision."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    target_robot_name: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The call as plain JSON data."""
        return self.model_dump()


class Decision(StateModel):
    """An agent decision: what it says and the tool calls it makes, executed in order."""

    say: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The decision as plain JSON data."""
        return self.model_dump()


def parse_decision(raw: Mapping[str, Any] | Decision) -> Decision:
    """Validate a decision given as a dict; a broken shape raises ContractError.

    Only the shape is checked here. Calls to unknown tools, robots or ids are valid
    decisions: they execute as failed `bad_call`s, which is what the agent must learn from.
    """
    if isinstance(raw, Decision):
        return raw
    try:
        return Decision.model_validate(raw)
    except ValidationError as exc:
        violations = [
            ContractViolation(".".join(str(part) for part in error["loc"]) or "$", error["msg"])
            for error in exc.errors()
        ]
        raise ContractError("decision", violations) from exc
