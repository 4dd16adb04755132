"""What an agent author supplies to decide: a policy, from an input and its memory to candidates."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from gencoach.agents.memory import Memory
from gencoach.errors import GencoachError
from gencoach.protocol import AgentDecision, AgentError, AgentInput, JsonObject


class PolicyError(GencoachError):
    """A policy cannot decide for an input; each of the input's candidates becomes an error."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(f"{code}: {message}")


@dataclass(frozen=True)
class Decided:
    """One candidate a policy produced: a decision, or the error saying why there is none.

    `memory` None lets the toolkit record the instruction and the decision in the input's
    memory; a policy that keeps other state returns the whole new memory here.
    """

    decision: AgentDecision | None = None
    error: AgentError | None = None
    internal_steps: list[JsonObject] = field(default_factory=list)
    memory: Memory | None = None

    def __post_init__(self) -> None:
        if (self.decision is None) == (self.error is None):
            raise ValueError("a candidate has exactly one of a decision and an error")

    @classmethod
    def of(
        cls,
        decision: AgentDecision,
        *,
        internal_steps: Sequence[JsonObject] = (),
        memory: Memory | None = None,
    ) -> Decided:
        """A completed candidate."""
        return cls(decision=decision, internal_steps=list(internal_steps), memory=memory)

    @classmethod
    def failed(
        cls,
        code: str,
        message: str,
        *,
        component: str | None = None,
        internal_steps: Sequence[JsonObject] = (),
    ) -> Decided:
        """An error candidate with its `{code, message}`."""
        error = AgentError(code=code, message=message, component=component)
        return cls(error=error, internal_steps=list(internal_steps))


class Policy(Protocol):
    """Decides `count` candidates for one input, in candidate order."""

    async def decide(self, agent_input: AgentInput, memory: Memory, count: int) -> list[Decided]:
        """The candidates; raise PolicyError when the input cannot be answered at all."""
        ...
