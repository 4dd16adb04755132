"""Routing: which coaching request, if any, a terminal event on a candidate opens.

`route` answers with a `Routed` (the route, the agent's coaching kind and the marker
`type_coaching`), or a `Skip` with the reason when the config, the agent or the trajectory
rules it out, so it is recorded rather than silently dropped. The routes and what opens
each: docs/coaching.md, "Routes".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gencoach.config import RouteSwitches
from gencoach.service.store.trajectory import Step, diagnosable

Route = Literal["format", "failure", "no_action", "exceeded", "suboptimal", "text_rewrite"]
AgentKind = Literal["format", "failure", "suboptimal"]

_TYPES: dict[Route, str] = {
    "format": "format_error:format_fix",
    "failure": "failure:diagnosis",
    "no_action": "no_action:diagnosis",
    "exceeded": "exceeded:diagnosis",
    "suboptimal": "finish_suboptimal:suboptimal_diagnosis",
    "text_rewrite": "failure:text_only_rewrite",
}
_KINDS: dict[Route, AgentKind | None] = {
    "format": "format",
    "failure": "failure",
    "no_action": "failure",
    "exceeded": "failure",
    "suboptimal": "suboptimal",
    "text_rewrite": None,
}
_FAILURE_EVENTS = ("failure", "no_action", "exceeded")
SUBOPTIMAL_EVENT = "finish_suboptimal"


@dataclass(frozen=True)
class AgentCoaching:
    """What an agent announced about coaching in its `GET /v1/info`."""

    specialized: frozenset[str] = frozenset()
    resume: bool = False
    # Why specialized coaching cannot be had (a refused session, no info), if known.
    unavailable: str | None = None
    # Whether it reads `decision_source` in the payloads gencoach writes.
    reads_source: bool = False


@dataclass(frozen=True)
class Routed:
    """A request to open: its route, the agent's coaching kind and the marker type."""

    route: Route
    kind: AgentKind | None
    type_coaching: str
    diagnosable: int


SkipCode = Literal[
    "route_off",
    "no_resume",
    "kind_unavailable",
    "kind_not_offered",
    "nothing_diagnosable",
    "coached_terminal",
    "already_faulty",
    "suboptimal_done",
]


@dataclass(frozen=True)
class Skip:
    """An opportunity that will not become a request, and why (`code` names the rule)."""

    route: Route
    type_coaching: str
    reason: str
    code: SkipCode


def opportunity(steps: list[Step]) -> Route | None:
    """The route a trajectory's last step opens, or None when it ends nothing coachable."""
    last = steps[-1]
    if last.candidate.invalid_reason is not None:
        return "format"
    if last.execution is None or last.execution.stage_end is None:
        return None
    end = last.execution.stage_end
    if end.event == "failure":
        return "text_rewrite" if last.situation.stage.text_only else "failure"
    if end.event in _FAILURE_EVENTS:
        return end.event  # type: ignore[return-value]
    if end.event == "success" and end.state == "acceptable":
        return "suboptimal"
    return None


def _event_of(type_coaching: str | None) -> str | None:
    return type_coaching.split(":", 1)[0] if type_coaching else None


def route(steps: list[Step], agent: AgentCoaching, switches: RouteSwitches) -> Routed | Skip | None:
    """Decide what the trajectory ending in `steps[-1]` opens, or None if nothing."""
    chosen = opportunity(steps) if steps else None
    if chosen is None:
        return None
    type_coaching = _TYPES[chosen]

    def skip(code: SkipCode, reason: str) -> Skip:
        return Skip(chosen, type_coaching, reason, code)

    if not getattr(switches, chosen):
        return skip("route_off", f"the {chosen} route is switched off (coaching.routes.{chosen})")
    kind = _KINDS[chosen]
    if kind is None and not agent.resume:
        return skip("no_resume", "the agent does not announce coaching_resume")
    if kind is not None and kind not in agent.specialized:
        if agent.unavailable is not None:
            unavailable = f"the agent's {kind} coaching is unavailable: {agent.unavailable}"
            return skip("kind_unavailable", unavailable)
        return skip("kind_not_offered", f"the agent does not offer {kind} coaching")
    terminal = steps[-1]
    effective = diagnosable(steps) if chosen != "format" else [terminal]
    if not effective:
        return skip("nothing_diagnosable", "no diagnosable step is left in the current stage")
    coached = terminal.candidate.origin == "coaching" or terminal.marker.type_coaching is not None
    after_suboptimal = _event_of(terminal.marker.type_coaching) == SUBOPTIMAL_EVENT
    allowed_again = chosen in _FAILURE_EVENTS and after_suboptimal
    if chosen != "format" and coached and len(effective) <= 1 and not allowed_again:
        reason = "the terminal decision is itself coached and is the only diagnosable step"
        return skip("coached_terminal", reason)
    current = [step for step in steps if step.in_current_stage]
    faulty = next((step for step in current if step.marker.diagnosed_as_faulty), None)
    if faulty is not None and chosen != "format":
        blamed = faulty.candidate.candidate_id
        reason = f"the trajectory holds a decision already diagnosed as faulty ({blamed})"
        return skip("already_faulty", reason)
    if chosen == "suboptimal":
        for step in steps:
            seen = [*step.marker.diagnostic_types, step.marker.type_coaching]
            if any(_event_of(item) == SUBOPTIMAL_EVENT for item in seen):
                return skip(
                    "suboptimal_done", "this trajectory already had its suboptimal coaching"
                )
    return Routed(chosen, kind, type_coaching, len(effective))
