"""What an agent author supplies to repair: a coach, from a coaching request to proposals."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from gencoach.agents.sessions import CoachingSession
from gencoach.protocol import (
    AgentDecision,
    AgentInput,
    CoachingLog,
    CoachingProposal,
    DecisionSource,
    ReinjectionPoint,
    ReplaceDecision,
    ReplaceSay,
    SpecializedCoachingRequest,
)


@dataclass(frozen=True)
class CoachingOutcome:
    """A coach's answer, which the toolkit sends with the request's id once validated."""

    status: Literal["corrected", "abandoned", "error"]
    proposals: list[CoachingProposal] = field(default_factory=list)
    reason: str | None = None
    logs: list[CoachingLog] = field(default_factory=list)

    @classmethod
    def corrected(
        cls, proposals: Sequence[CoachingProposal], logs: Sequence[CoachingLog] = ()
    ) -> CoachingOutcome:
        """Proposals to reinject (at least one)."""
        return cls("corrected", list(proposals), None, list(logs))

    @classmethod
    def abandoned(cls, reason: str, logs: Sequence[CoachingLog] = ()) -> CoachingOutcome:
        """No correction, and why."""
        return cls("abandoned", [], reason, list(logs))

    @classmethod
    def failed(cls, reason: str, logs: Sequence[CoachingLog] = ()) -> CoachingOutcome:
        """The coach itself broke (status `error`), and how."""
        return cls("error", [], reason, list(logs))


class Coach(Protocol):
    """Repairs a decision of a trajectory for the kinds the agent announces.

    With `requires_session`, `POST /v1/coaching` for a run without a session is refused
    with 404; otherwise the coach is called with `session` None and works without backends.
    """

    requires_session: bool

    async def coach(
        self, request: SpecializedCoachingRequest, session: CoachingSession | None
    ) -> CoachingOutcome:
        """The outcome for one request; proposals may name only the points it offers."""
        ...


def replace_decision(
    point_id: str, decision: AgentDecision, *, source: DecisionSource | None = None
) -> CoachingProposal:
    """A proposal that resumes at `point_id` with this whole decision.

    Its `extra_keys` is the payload itself: the coach (gencoach or MAGMA-GEN) sets the
    reinjected input's `extra_keys["coaching"]` to it, verbatim. `source` says where the
    decision came from (`gencoach.protocol.DECISION_SOURCES`); without it gencoach
    records `unknown`.
    """
    payload = ReplaceDecision(decision=decision, decision_source=source)
    return CoachingProposal(reinjection_point_id=point_id, extra_keys=_dumped(payload))


def replace_say(
    point_id: str, text: str, *, source: DecisionSource | None = None
) -> CoachingProposal:
    """A proposal that resumes at `point_id` with these words (the payload, unwrapped)."""
    payload = ReplaceSay(text=text, decision_source=source)
    return CoachingProposal(reinjection_point_id=point_id, extra_keys=_dumped(payload))


def _dumped(payload: ReplaceDecision | ReplaceSay) -> dict[str, Any]:
    # An unsaid source is left out, as a MAGMA agent's payload leaves it out.
    unsaid = {"decision_source"} if payload.decision_source is None else set()
    return payload.model_dump(mode="json", exclude=unsaid)


def point_input(request: SpecializedCoachingRequest, point: ReinjectionPoint) -> AgentInput:
    """The input a reinjection point restarts from: its own, or its trajectory step's."""
    if point.input is not None:
        return point.input
    return next(step.input for step in request.trajectory if step.id == point.input_step_id)
