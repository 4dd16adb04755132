"""The reference coach: repairs `format`, `failure` and `suboptimal` with a replacement decision.

`ReferenceCoach` is the coach (its docstring gives the order it tries repairs in and the
`decision_source` of each); `malformation` judges a repair as the generator would.
"""

from __future__ import annotations

import json

from gencoach.agents.coach import CoachingOutcome, point_input, replace_decision
from gencoach.agents.memory import Memory
from gencoach.agents.policy import Policy, PolicyError
from gencoach.agents.reference.prompts import repair_messages
from gencoach.agents.sessions import CoachingSession
from gencoach.errors import BackendError, ContractError
from gencoach.protocol import (
    RECOVERY_POINT,
    REPLACEMENT_POINT,
    AgentDecision,
    AgentInput,
    CoachingLog,
    DecisionSource,
    ReinjectionPoint,
    SpecializedCoachingRequest,
)
from gencoach.protocol.decision_text import format_decision, parse_decision


def malformation(decision: AgentDecision, agent_input: AgentInput) -> str | None:
    """Why a decision breaks the input's tool contract (as the generator judges), or None."""
    if decision.say.strip() and decision.tool_calls:
        return "it both says words and calls tools"
    if not decision.say.strip() and not decision.tool_calls:
        return "it is empty"
    specs = {tool.get("name"): tool.get("arguments") for tool in agent_input.tools}
    for call in decision.tool_calls:
        if specs and call.name not in specs:
            return f"it calls unknown tools [{call.name!r}]"
        expected = specs.get(call.name)
        if isinstance(expected, dict) and set(expected) != set(call.arguments):
            return f"{call.name} takes {sorted(expected)}, not {sorted(call.arguments)}"
    return None


def _points(request: SpecializedCoachingRequest) -> list[ReinjectionPoint]:
    offered = {point.id: point for point in request.reinjection_points}
    chosen = [offered[name] for name in (REPLACEMENT_POINT, RECOVERY_POINT) if name in offered]
    return chosen or request.reinjection_points[:1]


class ReferenceCoach:
    """The reference agent's coach; `repair_policy` decides again, and `repair_source`
    says who that is: `fallback` for a policy without its seeded mistakes,
    `repair_model` for the agent's model asked again.

    In order, it takes the diagnosis's `expected_decision` when it follows the one-line
    convention of `gencoach.protocol.decision_text`; for `format`, its repair policy's
    decision; then each session backend in turn, asked for the decision as JSON; last,
    for `failure` and `suboptimal`, its repair policy's decision. The decision is proposed
    at `replacement`, and also at `recovery` when offered (a refused call changed nothing,
    so the same decision applies after its feedback), with who made it as its
    `decision_source`: `expected_decision` (the diagnosis), `repair_model` (a session
    backend, or the agent's model asked again), or `fallback` (the policy without its
    seeded mistakes, which only the reference agent has, so that decision is never the
    coach's, whichever step took it). When nothing gives a well-formed decision it
    abandons, saying why. No session is required: without one, only the backend step is
    skipped.
    """

    requires_session = False

    def __init__(
        self, repair_policy: Policy | None = None, repair_source: DecisionSource = "fallback"
    ) -> None:
        self.repair_policy = repair_policy
        self.repair_source: DecisionSource = repair_source

    async def coach(
        self, request: SpecializedCoachingRequest, session: CoachingSession | None
    ) -> CoachingOutcome:
        """Propose the repaired decision at the offered points, or abandon with the reasons."""
        points = _points(request)
        if not points:
            return CoachingOutcome.abandoned("the request offers no reinjection point")
        agent_input = point_input(request, points[0])
        notes: list[str] = []
        source: DecisionSource = "expected_decision"
        decision = self._expected(request, notes)
        if decision is None and request.kind == "format":
            source, decision = self.repair_source, await self._redecide(agent_input, notes)
        if decision is None:
            source, decision = "repair_model", await self._ask(request, agent_input, session, notes)
        if decision is None and request.kind != "format":
            # Last resort: the scripted policies without the mistakes they make on
            # purpose know the intended decision at that step; a model decides again.
            source, decision = self.repair_source, await self._redecide(agent_input, notes)
        if decision is None:
            return CoachingOutcome.abandoned("; ".join(notes), [_log(request, notes)])
        where = ", ".join(p.id for p in points)
        notes.append(f"proposed at {where} ({source}): {format_decision(decision)}")
        proposals = [replace_decision(point.id, decision, source=source) for point in points]
        return CoachingOutcome.corrected(proposals, [_log(request, notes)])

    def _expected(
        self, request: SpecializedCoachingRequest, notes: list[str]
    ) -> AgentDecision | None:
        expected = request.diagnosis.expected_decision if request.diagnosis else None
        if not expected:
            notes.append("the diagnosis gives no expected decision")
            return None
        decision = parse_decision(expected)
        if decision is None:
            notes.append(f"the expected decision {expected!r} does not parse as a decision")
        else:
            notes.append("took the diagnosis's expected decision")
        return decision

    async def _redecide(self, agent_input: AgentInput, notes: list[str]) -> AgentDecision | None:
        if self.repair_policy is None:
            notes.append("no policy to decide again")
            return None
        try:
            [decided] = await self.repair_policy.decide(agent_input, Memory.of(agent_input), 1)
        except (PolicyError, ContractError, ValueError) as error:
            notes.append(f"deciding again failed: {error}")
            return None
        if decided.decision is None:
            assert decided.error is not None
            notes.append(f"deciding again gave an error: {decided.error.message}")
            return None
        problem = malformation(decided.decision, agent_input)
        if problem is not None:
            notes.append(f"deciding again gave a malformed decision: {problem}")
            return None
        if self.repair_source == "fallback":
            notes.append("decided again without mistakes (the fallback)")
        else:
            notes.append(f"decided again with the agent's model ({self.repair_source})")
        return decided.decision

    async def _ask(
        self,
        request: SpecializedCoachingRequest,
        agent_input: AgentInput,
        session: CoachingSession | None,
        notes: list[str],
    ) -> AgentDecision | None:
        if session is None:
            notes.append(f"no coaching session for run {request.run_id}, so no backend to ask")
            return None
        for name in session.backend_names:
            try:
                async with session.make_backend(name) as backend:
                    answer = await backend.ask(repair_messages(request), AgentDecision)
            except BackendError as error:
                notes.append(f"backend {name} failed: {error}")
                continue
            problem = malformation(answer.value, agent_input)
            if problem is None:
                notes.append(f"backend {name} answered {json.dumps(answer.value.model_dump())}")
                return answer.value
            notes.append(f"backend {name} answered a malformed decision: {problem}")
        return None


def _log(request: SpecializedCoachingRequest, notes: list[str]) -> CoachingLog:
    lines = [f"# {request.kind} repair of step {request.target_step_id}", ""]
    lines += [f"- {note}" for note in notes]
    return CoachingLog(coaching_type=f"{request.kind}_repair", content="\n".join(lines))
