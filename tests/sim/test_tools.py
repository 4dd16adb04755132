"""Each tool's preconditions, effects and MAGMA feedback messages."""

from __future__ import annotations

from typing import Any

import pytest

from gencoach.sim import TOOLS, ToolCall, World, execute, tabletop, tool_specs


def run(world: World, name: str, robot: str = "panda", **arguments: Any) -> Any:
    """Execute one call on the world."""
    return execute(world, ToolCall(name=name, arguments=arguments, target_robot_name=robot))


def test_specs_follow_the_magma_shape() -> None:
    """Every tool is `{name, description, arguments: {param: {description, type}}}`."""
    specs = {spec["name"]: spec for spec in tool_specs()}
    assert set(specs) == {"press_button", "take_obj", "depose", "cancel_current_action"}
    assert specs["press_button"]["arguments"]["id"]["type"] == "str"
    assert specs["cancel_current_action"]["arguments"] == {}
    for spec in specs.values():
        assert set(spec) == {"name", "description", "arguments"}
        assert spec["description"]
        for param in spec["arguments"].values():
            assert set(param) == {"description", "type"}
    assert list(TOOLS) == [spec["name"] for spec in tool_specs()]


def test_press_button_counts_the_press_and_logs_it() -> None:
    """A press succeeds, counts on the button and is appended to the press log."""
    world = tabletop(0)
    result = run(world, "press_button", id="sw3")
    assert result.result is True
    assert result.error_flag == "none"
    assert result.feedback_text == "panda: press_button succeed"
    assert world.buttons["sw3"].presses == 1
    assert world.press_log == ["sw3"]
    assert world.robots["panda"].current_action == "press_button(sw3)"


def test_press_button_refuses_an_unknown_button() -> None:
    """Pressing a button that does not exist fails as a bad call."""
    result = run(tabletop(0), "press_button", id="sw9")
    assert (result.result, result.error_flag) == (False, "bad_call")
    assert result.feedback_text == "panda: press_button failed with message: unknown button 'sw9'"


def test_take_obj_moves_the_object_into_the_gripper() -> None:
    """Taking an object removes it from its place and fills the robot's gripper."""
    world = tabletop(0)
    result = run(world, "take_obj", obj="cube")
    assert result.feedback_text == "panda: take_obj succeed"
    assert world.robots["panda"].holding == "cube"
    assert world.objects["cube"].place is None


def test_take_obj_refuses_a_second_object() -> None:
    """A robot holds one object at a time."""
    world = tabletop(0)
    run(world, "take_obj", obj="cube")
    result = run(world, "take_obj", obj="ball")
    assert result.message == "already holding cube"
    assert result.error_flag == "bad_call"
    assert world.objects["ball"].place == "table"


def test_take_obj_refuses_an_object_another_robot_holds() -> None:
    """An object held by one robot cannot be taken by another."""
    world = tabletop(0)
    run(world, "take_obj", obj="cube")
    result = run(world, "take_obj", robot="ur5", obj="cube")
    assert result.feedback_text == "ur5: take_obj failed with message: cube is held by panda"
    assert world.robots["panda"].holding == "cube"


def test_take_obj_refuses_an_unknown_object() -> None:
    """Taking an object that does not exist fails as a bad call."""
    result = run(tabletop(0), "take_obj", obj="pyramid")
    assert (result.message, result.error_flag) == ("unknown object 'pyramid'", "bad_call")


def test_depose_puts_the_held_object_on_the_target() -> None:
    """Deposing empties the gripper and lays the object on the target place."""
    world = tabletop(0)
    run(world, "take_obj", obj="cone")
    result = run(world, "depose", target="shelf")
    assert result.feedback_text == "panda: depose succeed"
    assert world.objects["cone"].place == "shelf"
    assert world.robots["panda"].holding is None


def test_depose_needs_something_held() -> None:
    """Deposing with an empty gripper fails with MAGMA's message."""
    result = run(tabletop(0), "depose", target="table")
    assert result.feedback_text == "panda: depose failed with message: nothing is held"
    assert result.error_flag == "bad_call"


def test_depose_refuses_an_unknown_place() -> None:
    """Deposing on a place that does not exist fails and the robot keeps its object."""
    world = tabletop(0)
    run(world, "take_obj", obj="cone")
    result = run(world, "depose", target="green_bin")
    assert result.message == "unknown place 'green_bin'"
    assert world.robots["panda"].holding == "cone"


def test_cancel_current_action_always_succeeds_and_clears_it() -> None:
    """Cancel succeeds with or without an action to cancel, and clears the current action."""
    world = tabletop(0)
    assert run(world, "cancel_current_action").feedback_text == (
        "panda: cancel_current_action succeed"
    )
    run(world, "press_button", id="sw0")
    result = run(world, "cancel_current_action")
    assert result.result is True
    assert world.robots["panda"].current_action is None


def test_unknown_robot_is_a_bad_call() -> None:
    """A call for a robot that does not exist fails and names the known robots."""
    result = run(tabletop(0), "press_button", robot="r2d2", id="sw0")
    assert result.robot == "r2d2"
    assert result.error_flag == "bad_call"
    assert result.message == "unknown robot 'r2d2'; known robots: panda, ur5"


def test_empty_robot_name_means_the_only_robot() -> None:
    """Without a robot name, a one-robot world uses its robot and a two-robot world refuses."""
    single = tabletop(0, robots=("panda",))
    assert run(single, "press_button", robot="", id="sw0").robot == "panda"
    assert run(tabletop(0), "press_button", robot="", id="sw0").error_flag == "bad_call"


def test_unknown_tool_is_a_bad_call() -> None:
    """A call to a tool that does not exist fails as a bad call."""
    result = run(tabletop(0), "fly")
    assert result.feedback_text == "panda: fly failed with message: unknown tool 'fly'"
    assert result.error_flag == "bad_call"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "missing argument 'id'"),
        ({"id": "sw0", "force": "hard"}, "unexpected argument 'force'"),
        ({"id": 0}, "argument 'id' must be a str"),
    ],
)
def test_arguments_are_checked_against_the_spec(arguments: dict[str, Any], message: str) -> None:
    """Missing, unexpected or non-string arguments fail as bad calls."""
    result = run(tabletop(0), "press_button", **arguments)
    assert (result.message, result.error_flag) == (message, "bad_call")


@pytest.mark.parametrize(
    ("name", "robot", "arguments"),
    [
        ("press_button", "panda", {"id": "sw9"}),
        ("take_obj", "ur5", {"obj": "pyramid"}),
        ("depose", "panda", {"target": "table"}),
        ("take_obj", "nobody", {"obj": "cube"}),
        ("jump", "panda", {}),
        ("cancel_current_action", "panda", {"now": "yes"}),
    ],
)
def test_a_failed_call_leaves_the_world_unchanged(
    name: str, robot: str, arguments: dict[str, Any]
) -> None:
    """Nothing in the world changes when a call is refused."""
    world = tabletop(0)
    before = world.to_json()
    assert run(world, name, robot=robot, **arguments).result is False
    assert world.to_json() == before
