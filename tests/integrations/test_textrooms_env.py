"""The text rooms' easier houses: fewer rooms (`rooms`) and no cursed object (`decoy`); the
oracle still solves them, the default house is drawn as before, and the adapter's options
rebuild the same houses (the teacher replays from them)."""

from __future__ import annotations

import pytest

pytest.importorskip("gymnasium")

from gencoach.integrations.textrooms import TextRoomsAdapter, TextRoomsEnv
from gencoach.integrations.textrooms.env import ROOM_COUNT


def solve(adapter: TextRoomsAdapter, seed: int) -> tuple[list[str], float]:
    """The oracle's actions on the seed's house, and the reward of the last."""
    env = adapter.make_env(seed)
    env.reset(seed=seed)
    actions: list[str] = []
    reward, done = 0.0, False
    while not done and len(actions) < 20:
        call = adapter.oracle(env, seed, actions)
        assert call is not None
        actions.append(adapter.action(call))
        _, reward, done, _, _ = env.step(actions[-1])
    return actions, reward


def test_the_default_house_has_five_rooms() -> None:
    env = TextRoomsEnv()
    env.reset(seed=3)
    assert len(env.state.doors) == ROOM_COUNT == 5
    assert TextRoomsAdapter().options() == {"max_steps": 30}
    assert "it is cursed" in env.mission()


def test_without_a_decoy_the_house_is_the_same_but_for_the_cursed_object() -> None:
    for seed in range(20):
        cursed, plain = TextRoomsEnv(2), TextRoomsEnv(2, decoy=False)
        cursed.reset(seed=seed)
        plain.reset(seed=seed)
        assert plain.state.doors == cursed.state.doors
        assert plain.state.goal_room == cursed.state.goal_room
        assert plain.state.objects == {
            cursed.state.goal_object: cursed.state.objects[cursed.state.goal_object]
        }
        assert plain.mission() == cursed.mission().split(" Do not")[0]
        adapter = TextRoomsAdapter(rooms=2, decoy=False)
        assert solve(adapter, seed)[1] == 1.0
        assert adapter.options() == {"max_steps": 30, "rooms": 2, "decoy": False}
        assert TextRoomsAdapter(**adapter.options()).options() == adapter.options()


@pytest.mark.parametrize("rooms", [1, 2, 3])
def test_a_smaller_house_is_solved_by_the_oracle_in_fewer_steps(rooms: int) -> None:
    adapter = TextRoomsAdapter(max_steps=8, rooms=rooms)
    for seed in range(20):
        env = adapter.make_env(seed)
        env.reset(seed=seed)
        house = env.state
        assert len(house.doors) == rooms
        actions, reward = solve(adapter, seed)
        assert reward == 1.0
        if rooms == 1:
            # everything lies in the one room: take the object, drop it
            assert set(house.objects.values()) == {house.location} == {house.goal_room}
            assert actions == [f"take {house.goal_object}", f"drop {house.goal_object}"]
            assert "Doors lead to: nowhere." in env.observe()
        else:
            # to the object, take it, back to the goal room, drop it: a two-room house
            # is always the same four commands
            assert house.objects[house.goal_object] != house.location
            assert len(actions) == 4 if rooms == 2 else 4 <= len(actions) <= 2 * rooms
    assert TextRoomsAdapter(**adapter.options()).options() == adapter.options()


def test_the_house_size_is_checked() -> None:
    for rooms in (0, 9):
        with pytest.raises(ValueError, match="1 to 8 rooms"):
            TextRoomsEnv(rooms)
