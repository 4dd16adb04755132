"""The scenario registry, seeded instances, and optimal plans from any state."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gencoach.errors import ConfigError
from gencoach.sim import SCENARIOS, Episode, ObjectsIn, Progress, get_scenario
from tests.sim.builders import act

Make = Callable[..., Episode]


def test_registry_lists_the_four_scenarios() -> None:
    """Buttons, sorting, the two-stage task and the text question are registered."""
    assert list(SCENARIOS) == ["buttons", "sorting", "two_stage", "text_question"]
    assert get_scenario("sorting") is SCENARIOS["sorting"]


def test_unknown_scenario_is_a_config_error() -> None:
    """Asking for a scenario that does not exist names the setting and the known ones."""
    with pytest.raises(ConfigError, match="unknown scenario; known: buttons") as caught:
        get_scenario("juggling")
    assert caught.value.problems[0].path == "scenario"


def test_instances_are_seeded() -> None:
    """A seed fixes the instance; seeds vary it."""
    for scenario in SCENARIOS.values():
        first = scenario.build(3)
        again = scenario.build(3)
        assert first.world == again.world
        assert [s.instruction for s in first.stages] == [s.instruction for s in again.stages]
    instructions = {SCENARIOS["buttons"].build(seed).stages[0].instruction for seed in range(10)}
    assert len(instructions) > 1


@pytest.mark.parametrize("name", list(SCENARIOS))
@pytest.mark.parametrize("seed", range(8))
def test_following_the_optimal_plan_is_optimal(make_episode: Make, name: str, seed: int) -> None:
    """Each plan uses exactly the target calls and every stage ends success/optimal."""
    episode = make_episode(name, seed)
    for stage in episode.stages:
        assert episode.stage == stage
        plan = episode.optimal_plan()
        assert plan is not None
        assert len(plan.tool_calls) == stage.target_tool_calls
        steps = [episode.step(decision) for decision in plan.decisions()]
        assert [s.outcome.status for s in steps[:-1]] == ["ongoing"] * (len(steps) - 1)
        assert steps[-1].outcome.status == "optimal"
    assert episode.finished


def test_plan_restarts_from_the_current_state(make_episode: Make) -> None:
    """Midway through a stage, the plan covers only what is left to do."""
    episode = make_episode("sorting", seed=2)
    first = next(iter(episode.world.objects))
    take = {"name": "take_obj", "arguments": {"obj": first}, "target_robot_name": "ur5"}
    episode.step(act(take))
    plan = episode.optimal_plan()
    assert plan is not None
    assert len(plan.tool_calls) == episode.stage.target_tool_calls - 1
    assert plan.tool_calls[0].target_robot_name == "ur5"
    last = [episode.step(d) for d in plan.decisions()][-1]
    assert last.outcome.status == "optimal"


def test_plan_continues_a_button_sequence(make_episode: Make) -> None:
    """After the first press, the plan presses the rest of the sequence."""
    episode = make_episode("buttons", seed=5)
    plan = episode.optimal_plan()
    assert plan is not None
    episode.step(plan.decisions()[0])
    rest = episode.optimal_plan()
    assert rest is not None
    assert rest.tool_calls == plan.tool_calls[1:]


def test_no_plan_once_the_stage_has_failed(make_episode: Make) -> None:
    """A stage with a goal at -1 has no plan left."""
    episode = make_episode("sorting", seed=0)
    goal = episode.stage.goals[0]
    assert isinstance(goal, ObjectsIn)
    obj, place = goal.targets[0]
    wrong = "blue_bin" if place == "red_bin" else "red_bin"
    world = episode.world.model_copy(deep=True)
    world.objects[obj].place = wrong
    assert episode.stage.optimal_plan(Progress(world)) is None


def test_plan_decisions_are_agent_decisions(make_episode: Make) -> None:
    """Plans turn into AgentDecision dicts: one call each, or one answer."""
    plan = make_episode("buttons").optimal_plan()
    assert plan is not None
    decisions = plan.decisions()
    assert len(decisions) == 3
    assert all(set(d) == {"say", "tool_calls"} and len(d["tool_calls"]) == 1 for d in decisions)
    assert set(decisions[0]["tool_calls"][0]) == {"name", "arguments", "target_robot_name"}
    answer = make_episode("text_question").optimal_plan()
    assert answer is not None
    assert answer.decisions() == [{"say": answer.say, "tool_calls": []}]


def test_stage_budgets_are_consistent() -> None:
    """Every stage's target fits its budget, and text-only stages need no call."""
    for scenario in SCENARIOS.values():
        for stage in scenario.build(0).stages:
            assert 0 <= stage.target_tool_calls <= stage.max_tool_calls
            assert stage.text_only == (stage.max_tool_calls == 0)
            assert stage.instruction
            assert stage.goal
            assert stage.hint
