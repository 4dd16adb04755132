"""The tabletop world: seeded construction, JSON round trip, what the agent is shown."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gencoach.sim import ToolCall, World, execute, tabletop


def test_tabletop_has_robots_buttons_places_and_objects() -> None:
    """The standard table holds panda and ur5, sw0…sw5, a table, a shelf and colour bins."""
    world = tabletop(0)
    assert list(world.robots) == ["panda", "ur5"]
    assert list(world.buttons) == [f"sw{i}" for i in range(6)]
    assert list(world.places) == ["table", "shelf", "red_bin", "blue_bin"]
    assert {o.place for o in world.objects.values()} == {"table"}
    assert {o.colour for o in world.objects.values()} <= {"red", "blue"}


def test_same_seed_builds_the_same_world_and_seeds_vary_it() -> None:
    """A seed fixes the object colours; different seeds give different tables."""
    assert tabletop(4) == tabletop(4)
    colourings = {tuple(o.colour for o in tabletop(seed).objects.values()) for seed in range(20)}
    assert len(colourings) > 1


def test_json_round_trip_is_exact_after_changes() -> None:
    """A world restored from its JSON equals the original and serialises identically."""
    world = tabletop(7)
    execute(world, ToolCall(name="take_obj", arguments={"obj": "cube"}, target_robot_name="ur5"))
    execute(
        world, ToolCall(name="press_button", arguments={"id": "sw2"}, target_robot_name="panda")
    )
    world.injection.draws = 5
    restored = World.from_json(world.to_json())
    assert restored == world
    assert restored.to_json() == world.to_json()
    assert restored.robots["ur5"].holding == "cube"
    assert restored.press_log == ["sw2"]


def test_restored_world_is_independent_of_the_original() -> None:
    """Changing a restored world leaves the original untouched."""
    world = tabletop(1)
    restored = World.from_json(world.to_json())
    restored.buttons["sw0"].presses = 3
    assert world.buttons["sw0"].presses == 0


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("objects", "cube", "place"), None, "is nowhere"),
        (("objects", "cube", "place"), "moon", "unknown place"),
        (("robots", "panda", "holding"), "cube", "both on"),
        (("robots", "panda", "name"), "ur5", "filed under"),
    ],
)
def test_from_json_refuses_an_inconsistent_world(
    path: tuple[str, str, str], value: object, message: str
) -> None:
    """A serialised world whose parts contradict each other is refused."""
    data = tabletop(0).model_dump()
    data[path[0]][path[1]][path[2]] = value
    with pytest.raises(ValidationError, match=message):
        World.model_validate(data)


def test_from_json_refuses_unknown_fields() -> None:
    """A world with a field the model does not know is refused."""
    data = tabletop(0).model_dump()
    data["weather"] = "sunny"
    with pytest.raises(ValidationError):
        World.model_validate(data)


def test_attributes_show_ids_colours_and_positions() -> None:
    """The agent sees robot names, buttons, places with bin colours, objects and grippers."""
    world = tabletop(0)
    execute(world, ToolCall(name="take_obj", arguments={"obj": "ball"}, target_robot_name="panda"))
    attributes = world.attributes()
    assert attributes["known_robots"] == ["panda", "ur5"]
    assert attributes["buttons"][0] == "sw0"
    assert attributes["places"]["red_bin"] == {"kind": "bin", "colour": "red"}
    assert attributes["places"]["table"] == {"kind": "table"}
    assert attributes["objects"]["ball"]["place"] is None
    assert attributes["objects"]["cube"]["colour"] == world.objects["cube"].colour
    assert attributes["holding"] == {"panda": "ball", "ur5": None}
