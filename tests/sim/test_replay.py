"""Determinism: a restored episode replaying the same decisions gives the same results."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gencoach.sim import SCENARIOS, Episode, StepResult

# Mostly ids that exist, so calls succeed often and injections are drawn; some that do not.
TARGETS = {
    "press_button": ("id", ["sw0", "sw1", "sw2", "sw3", "sw4", "sw5", "sw9"]),
    "take_obj": ("obj", ["cube", "ball", "cone", "moon"]),
    "depose": ("target", ["table", "shelf", "red_bin", "blue_bin", "moon"]),
    "cancel_current_action": ("", []),
}

robots = st.sampled_from(["panda", "ur5", "panda", "ur5", "r2d2", ""])


@st.composite
def proper_calls(draw: st.DrawFn) -> dict[str, Any]:
    """A call with the right argument name for its tool."""
    name = draw(st.sampled_from(list(TARGETS)))
    param, values = TARGETS[name]
    arguments = {param: draw(st.sampled_from(values))} if param else {}
    return {"name": name, "arguments": arguments, "target_robot_name": draw(robots)}


odd_calls = st.builds(
    lambda name, arguments, robot: {
        "name": name,
        "arguments": arguments,
        "target_robot_name": robot,
    },
    st.sampled_from([*TARGETS, "fly"]),
    st.dictionaries(
        st.sampled_from(["id", "obj", "target", "x"]),
        st.sampled_from(["sw0", "cube", "table"]) | st.integers(),
        max_size=2,
    ),
    robots,
)
decisions = st.builds(
    lambda say, calls: {"say": say, "tool_calls": calls},
    st.sampled_from(["", "red", "blue", "done"]),
    st.lists(proper_calls() | odd_calls, max_size=4),
)


def play(episode: Episode, plays: list[dict[str, Any]]) -> tuple[list[StepResult], list[str]]:
    """Step through the decisions until the episode ends; keep each step and prior snapshot."""
    steps, snapshots = [], []
    for decision in plays:
        if episode.finished:
            break
        snapshots.append(episode.to_json())
        steps.append(episode.step(decision))
    return steps, snapshots


@settings(max_examples=200, deadline=None)
@given(
    scenario=st.sampled_from(list(SCENARIOS)),
    seed=st.integers(0, 50),
    probability=st.sampled_from([0.0, 0.3, 0.6, 1.0]),
    plays=st.lists(decisions, min_size=1, max_size=12),
    split=st.integers(0, 12),
)
def test_restore_then_replay_gives_identical_results(
    scenario: str, seed: int, probability: float, plays: list[dict[str, Any]], split: int
) -> None:
    """From any saved point, replaying the rest gives the same results, feedback and outcomes."""
    episode = Episode.start(scenario, seed, injection_probability=probability)
    steps, snapshots = play(episode, plays)
    at = split % len(steps)
    restored = Episode.from_json(snapshots[at])
    assert restored.to_json() == snapshots[at]
    replayed = [restored.step(decision) for decision in plays[at : len(steps)]]
    assert replayed == steps[at:]
    assert restored.to_json() == episode.to_json()
    assert restored.finished == episode.finished


def test_replaying_the_optimal_plan_from_every_point_matches() -> None:
    """Restored at each decision of a plan played with injections, the replay is identical."""
    for scenario in SCENARIOS:
        for seed in range(6):
            episode = Episode.start(scenario, seed, injection_probability=0.5)
            plays = []
            while not episode.finished:
                plan = episode.optimal_plan()
                assert plan is not None
                plays.append(plan.decisions()[0])
                episode.step(plays[-1])
            steps, snapshots = play(Episode.start(scenario, seed, injection_probability=0.5), plays)
            for at, snapshot in enumerate(snapshots):
                restored = Episode.from_json(snapshot)
                assert [restored.step(d) for d in plays[at:]] == steps[at:]


def test_same_seed_and_decisions_give_the_same_episode() -> None:
    """Two fresh episodes fed the same decisions end in the same state with the same results."""
    plays = [
        {"say": "", "tool_calls": [{"name": "press_button", "arguments": {"id": f"sw{i}"}}]}
        for i in range(6)
    ]
    for scenario in SCENARIOS:
        first = play(Episode.start(scenario, 11, injection_probability=0.5), plays)
        second = play(Episode.start(scenario, 11, injection_probability=0.5), plays)
        assert first == second


def test_a_copy_branches_independently() -> None:
    """Stepping a copied episode leaves the original where it was."""
    episode = Episode.start("sorting", 4)
    branch = episode.copy()
    plan = branch.optimal_plan()
    assert plan is not None
    branch.step(plan.decision())
    assert branch.finished
    assert not episode.finished
    assert episode.world.press_log == []
    assert all(o.place == "table" for o in episode.world.objects.values())
