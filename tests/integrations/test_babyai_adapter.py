"""The BabyAI adapter on the real levels: its oracle solves them, its text, its attributes."""

from __future__ import annotations

import pytest

from gencoach.integrations.gymnasium import GymEpisode
from gencoach.integrations.minigrid import LEVELS, BabyAIAdapter

pytest.importorskip("minigrid")


@pytest.mark.parametrize("level", LEVELS)
def test_the_oracle_solves_each_level_within_its_plan_length(level: str) -> None:
    """Following the BabyAI bot from the reset ends the episode rewarded, in as many steps
    as the stage's target says."""
    adapter = BabyAIAdapter(level)
    episode = GymEpisode.start(adapter, 3)
    target = episode.plan_length(64)
    assert target is not None
    for _ in range(target):
        action = adapter.oracle(episode.env, episode.seed, episode.actions)
        assert action is not None
        episode.observation, reward, terminated, _, _ = episode.env.step(action)
        episode.actions.append(action)
    assert terminated
    assert reward > 0


def test_the_view_names_objects_where_they_stand() -> None:
    """The text says what is seen, what is ahead and what is carried."""
    episode = GymEpisode.start(BabyAIAdapter("GoToLocal"), 0)
    text = episode.text()
    assert text.startswith("You see a ")
    assert " ahead" in text
    assert text.endswith("You carry nothing.")


def test_planner_attributes_can_be_left_out() -> None:
    """The scripted agent's attributes are there by default, and absent when turned off."""
    on, off = BabyAIAdapter("PickupDist"), BabyAIAdapter("PickupDist", planner_attributes=False)
    episode = GymEpisode.start(on, 5)
    assert on.attributes(episode.env, 5, [2]) == {
        "level": "PickupDist",
        "strict": False,
        "seed": 5,
        "actions": [2],
    }
    assert off.attributes(episode.env, 5, [2]) == {}
    assert BabyAIAdapter(**off.options()).planner_attributes is False
