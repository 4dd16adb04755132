"""Asking the agent for decisions, and judging whether an answer can be executed at all.

`AgentAsker` asks one agent; `Answer` is one candidate as the generator sees it;
`invalid_reason` says what the generator refuses (an `invalid` candidate, never executed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import httpx

from gencoach.agent_client import AgentClient
from gencoach.errors import AgentCallError
from gencoach.protocol import AgentDecision, AgentError, AgentInput, AgentOutput, AgentRequest
from gencoach.protocol.base import JsonObject
from gencoach.sim.tools import TOOLS

CALL_FAILED = "agent_call_failed"
"""The error code of the candidate standing for an agent call that gave no answer."""


@dataclass(frozen=True)
class Answer:
    """One candidate as the generator sees it: the agent's output, and why it is refused."""

    status: Literal["completed", "error"]
    decision: AgentDecision | None = None
    error: AgentError | None = None
    memory: JsonObject = field(default_factory=dict)
    internal_steps: list[JsonObject] = field(default_factory=list)
    invalid_reason: str | None = None

    @classmethod
    def of(cls, output: AgentOutput) -> Answer:
        """Judge one of the agent's outputs."""
        reason = invalid_reason(output.output) if output.output is not None else None
        return cls(
            status=output.status,
            decision=output.output,
            error=output.error,
            memory=dict(output.memory),
            internal_steps=list(output.internal_steps),
            invalid_reason=reason,
        )

    @classmethod
    def failed(cls, reason: str, memory: JsonObject) -> Answer:
        """The candidate standing for a call that gave no answer (the memory is kept)."""
        error = AgentError(code=CALL_FAILED, message=reason, component="generator")
        return cls(status="error", error=error, memory=dict(memory))

    def created_fields(
        self, candidate_id: str, situation_id: str, attempt_ids: tuple[int, ...]
    ) -> dict[str, Any]:
        """The fields of this candidate's `candidate.created` event."""
        decision = self.decision
        return {
            "candidate_id": candidate_id,
            "situation_id": situation_id,
            "response_status": self.status,
            "output": decision.model_dump(mode="json") if decision is not None else None,
            "error": self.error.model_dump(mode="json") if self.error is not None else None,
            "memory": self.memory,
            "internal_steps": self.internal_steps,
            "invalid_reason": self.invalid_reason,
            "origin": "model",
            "coaching_attempt_ids": list(attempt_ids),
        }

    @property
    def executable(self) -> bool:
        """Whether the world should execute this answer."""
        return self.decision is not None and self.invalid_reason is None


def invalid_reason(decision: AgentDecision) -> str | None:
    """Why the decision breaks the offered tool contract, or None when it may be executed.

    Refused: a decision that both says something and calls tools, a call to a tool that
    was not offered, a missing or unexpected argument, an argument that is not a string.
    What refers to the world (an unknown robot, button, object or place) and what breaks a
    precondition (taking with a full gripper) is a valid decision: the world executes it
    as a failed `bad_call`, whose feedback is what the agent must learn from.
    """
    if decision.say.strip() and decision.tool_calls:
        return "a decision either says something or calls tools, not both"
    for number, call in enumerate(decision.tool_calls, start=1):
        spec = TOOLS.get(call.name)
        where = f"tool call {number} ({call.name})"
        if spec is None:
            offered = ", ".join(TOOLS)
            return f"{where}: no such tool; the tools are {offered}"
        expected = [param for param, _ in spec.arguments]
        for param in call.arguments:
            if param not in expected:
                return f"{where}: unexpected argument '{param}'; it takes {_listed(expected)}"
        for param in expected:
            if param not in call.arguments:
                return f"{where}: missing argument '{param}'"
            if not isinstance(call.arguments[param], str):
                return f"{where}: argument '{param}' must be a string"
    return None


def _listed(names: list[str]) -> str:
    return ", ".join(f"'{name}'" for name in names) if names else "no arguments"


class AgentAsker:
    """Asks one agent for decisions, with bounded concurrency and a time limit per call."""

    def __init__(
        self, agent_url: str, http: httpx.AsyncClient, concurrency: int, timeout_s: float
    ) -> None:
        self.client = AgentClient(agent_url, http)
        self.limiter = anyio.CapacityLimiter(concurrency)
        self.timeout_s = timeout_s

    async def ask(self, request_id: str, agent_input: AgentInput) -> list[Answer]:
        """The input's `num_outputs` candidates, or one error candidate for the whole
        situation, with the reason, when the agent cannot be reached, times out or answers
        outside the protocol."""
        request = AgentRequest(request_id=request_id, inputs=[agent_input])
        reason = f"no answer within {self.timeout_s} s"
        async with self.limiter:
            with anyio.move_on_after(self.timeout_s):
                try:
                    response = await self.client.respond(request)
                except AgentCallError as error:
                    reason = error.reason
                else:
                    return [Answer.of(output) for output in response.root]
        return [Answer.failed(reason, agent_input.memory)]
