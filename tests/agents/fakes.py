"""Small policies and coaches for toolkit tests: they count calls and can be told to misbehave."""

from __future__ import annotations

from dataclasses import dataclass, field

from gencoach.agents import (
    CoachingOutcome,
    CoachingSession,
    Decided,
    Memory,
    PolicyError,
    replace_decision,
)
from gencoach.protocol import (
    AgentDecision,
    AgentInfo,
    AgentInput,
    CoachingProposal,
    SpecializedCoachingRequest,
    ToolCall,
)

PRESS = AgentDecision(
    tool_calls=[ToolCall(name="press_button", arguments={"id": "sw1"}, target_robot_name="panda")]
)


def info(*kinds: str, **changes: object) -> AgentInfo:
    """An announcement listing these coaching kinds."""
    data: dict[str, object] = {
        "agent_id": "fake",
        "agent_version": "1",
        "specialized_coaching": list(kinds),
        "capabilities": {},
    }
    return AgentInfo.parse({**data, **changes})


@dataclass
class EchoPolicy:
    """Says the instruction back, numbering candidates; `mode` makes it misbehave."""

    mode: str = "ok"  # ok | refuse | crash | short
    calls: list[AgentInput] = field(default_factory=list)

    async def decide(self, agent_input: AgentInput, memory: Memory, count: int) -> list[Decided]:
        """Echo the instruction once per candidate."""
        self.calls.append(agent_input)
        if self.mode == "refuse":
            raise PolicyError("unknown_task", "nothing to do with that")
        if self.mode == "crash":
            raise RuntimeError("boom")
        text = agent_input.instruction.content
        decided = [Decided.of(AgentDecision(say=f"{text} #{i}")) for i in range(count)]
        return decided[:-1] if self.mode == "short" else decided


@dataclass
class FixedCoach:
    """Answers every request with one proposal at `point` (offered or not)."""

    point: str = "replacement"
    requires_session: bool = False
    sessions: list[CoachingSession | None] = field(default_factory=list)

    async def coach(
        self, request: SpecializedCoachingRequest, session: CoachingSession | None
    ) -> CoachingOutcome:
        """One replace_decision proposal, or an abandon for an `abandon` goal."""
        self.sessions.append(session)
        if request.stage.goal == "abandon":
            return CoachingOutcome.abandoned("nothing to fix")
        proposal: CoachingProposal = replace_decision(self.point, PRESS)
        return CoachingOutcome.corrected([proposal])
