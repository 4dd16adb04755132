"""Routing terminal events to coaching requests, and every rule that skips one."""

from __future__ import annotations

import dataclasses

import pytest

from gencoach.config import RouteSwitches
from gencoach.protocol import CoachingMarker, StageEnd
from gencoach.service.coaching.router import AgentCoaching, Routed, Skip, route
from gencoach.service.store.graphstore import GraphStore
from gencoach.service.store.nodes import RunGraph
from gencoach.service.store.trajectory import Step, trajectory
from tests.support.graphs import apply_known

pytestmark = pytest.mark.asyncio

EVERYTHING = AgentCoaching(frozenset({"format", "failure", "suboptimal"}), resume=True)
ON = RouteSwitches()


def _steps(graph: RunGraph, cid: int, **markers: CoachingMarker) -> list[Step]:
    return trajectory(graph, cid, {int(key[1:]): value for key, value in markers.items()})


async def test_each_terminal_event_opens_its_route(store: GraphStore) -> None:
    """Invalid answer, failed stage and suboptimal finish open format, failure, suboptimal."""
    graph = await apply_known(store)
    assert route(_steps(graph, 1), EVERYTHING, ON) == Routed(
        "format", "format", "format_error:format_fix", 1
    )
    assert route(_steps(graph, 3), EVERYTHING, ON) == Routed(
        "failure", "failure", "failure:diagnosis", 2
    )
    suboptimal = route(_steps(graph, 4), EVERYTHING, ON)
    assert suboptimal == Routed(
        "suboptimal", "suboptimal", "finish_suboptimal:suboptimal_diagnosis", 1
    )
    assert route(_steps(graph, 6), EVERYTHING, ON) is None  # an optimal finish
    assert route(_steps(graph, 0), EVERYTHING, ON) is None  # still ongoing


async def test_no_action_and_exceeded_route_to_failure_coaching(store: GraphStore) -> None:
    """no_action and exceeded ends ask the agent for failure coaching with their own type."""
    graph = await apply_known(store)
    steps = _steps(graph, 3)
    for event in ("no_action", "exceeded"):
        execution = steps[-1].execution
        assert execution is not None
        ended = execution.model_copy(update={"stage_end": StageEnd(event=event, state="exceeded")})
        changed = [*steps[:-1], dataclasses.replace(steps[-1], execution=ended)]
        assert route(changed, EVERYTHING, ON) == Routed(event, "failure", f"{event}:diagnosis", 2)


async def test_text_only_failure_is_rewritten_for_resuming_agents(store: GraphStore) -> None:
    """A failed text-only stage becomes a rewrite, skipped for agents without coaching_resume."""
    graph = await apply_known(store)
    steps = _steps(graph, 3)
    stage = steps[-1].situation.stage.model_copy(update={"text_only": True})
    situation = steps[-1].situation.model_copy(update={"stage": stage})
    text_steps = [*steps[:-1], dataclasses.replace(steps[-1], situation=situation)]
    assert route(text_steps, EVERYTHING, ON) == Routed(
        "text_rewrite", None, "failure:text_only_rewrite", 2
    )
    plain = AgentCoaching(frozenset({"failure"}), resume=False)
    assert route(text_steps, plain, ON) == Skip(
        "text_rewrite",
        "failure:text_only_rewrite",
        "the agent does not announce coaching_resume",
        "no_resume",
    )


async def test_skip_when_switched_off_or_not_offered(store: GraphStore) -> None:
    """A route off in config, or a kind the agent does not offer, is skipped with the reason."""
    graph = await apply_known(store)
    off = RouteSwitches(failure=False)
    assert route(_steps(graph, 3), EVERYTHING, off) == Skip(
        "failure",
        "failure:diagnosis",
        "the failure route is switched off (coaching.routes.failure)",
        "route_off",
    )
    only_format = AgentCoaching(frozenset({"format"}))
    skipped = route(_steps(graph, 3), only_format, ON)
    assert isinstance(skipped, Skip)
    assert skipped.reason == "the agent does not offer failure coaching"
    refused = AgentCoaching(unavailable="its coaching session was refused (backend down)")
    skipped = route(_steps(graph, 3), refused, ON)
    assert isinstance(skipped, Skip)
    assert skipped.reason == (
        "the agent's failure coaching is unavailable: "
        "its coaching session was refused (backend down)"
    )


async def test_skip_when_a_faulty_decision_is_in_the_trajectory(store: GraphStore) -> None:
    """A trajectory that already holds a decision diagnosed as faulty is not coached again."""
    graph = await apply_known(store)
    steps = _steps(graph, 3, c0=CoachingMarker(diagnosed_as_faulty=True))
    skipped = route(steps, EVERYTHING, ON)
    assert isinstance(skipped, Skip)
    assert skipped.reason == "the trajectory holds a decision already diagnosed as faulty (c1)"


async def test_skip_a_coached_terminal_with_one_diagnosable_step(store: GraphStore) -> None:
    """A coached decision that is the only diagnosable step left is not coached again."""
    graph = await apply_known(store)
    coached = CoachingMarker(type_coaching="failure:diagnosis", trajectory_diagnostic_applied=True)
    skipped = route(_steps(graph, 3, c3=coached), EVERYTHING, ON)
    assert isinstance(skipped, Skip)
    assert (
        skipped.reason == "the terminal decision is itself coached and is the only diagnosable step"
    )
    after_suboptimal = CoachingMarker(
        type_coaching="finish_suboptimal:suboptimal_diagnosis", trajectory_diagnostic_applied=True
    )
    assert isinstance(route(_steps(graph, 3, c3=after_suboptimal), EVERYTHING, ON), Routed)


async def test_suboptimal_coaching_once_per_trajectory(store: GraphStore) -> None:
    """A trajectory that already had suboptimal coaching is not given another."""
    graph = await apply_known(store)
    seen = CoachingMarker(diagnostic_types=["finish_suboptimal:suboptimal_diagnosis"])
    skipped = route(_steps(graph, 4, c0=seen), EVERYTHING, ON)
    assert isinstance(skipped, Skip)
    assert skipped.reason == "this trajectory already had its suboptimal coaching"
