"""Goal evaluation to 1, 0 or -1, and the plans goals propose."""

from __future__ import annotations

import pytest

from gencoach.sim import (
    Answer,
    Holding,
    ObjectsIn,
    PressSequence,
    Progress,
    ToolCall,
    Verdict,
    World,
    execute,
    tabletop,
)
from gencoach.sim.goals import combine


def move(world: World, obj: str, place: str, robot: str = "panda") -> None:
    """Take an object and depose it somewhere, asserting both calls succeed."""
    for name, arguments in (("take_obj", {"obj": obj}), ("depose", {"target": place})):
        call = ToolCall(name=name, arguments=arguments, target_robot_name=robot)
        assert execute(world, call).result


@pytest.mark.parametrize(
    ("presses", "value"),
    [
        ((), 0),
        (("sw0",), 0),
        (("sw0", "sw0"), 0),
        (("sw0", "sw0", "sw4"), 1),
        (("sw1",), -1),
        (("sw0", "sw4"), -1),
        (("sw0", "sw0", "sw4", "sw4"), -1),
    ],
)
def test_press_sequence_judges_each_press(presses: tuple[str, ...], value: int) -> None:
    """A prefix of the sequence is 0, the whole of it is 1, any departure is -1."""
    goal = PressSequence(("sw0", "sw0", "sw4"))
    assert goal.evaluate(Progress(tabletop(0), presses)).value == value


def test_press_sequence_failure_names_the_wrong_press() -> None:
    """The failure reason says which press departed and what was expected."""
    verdict = PressSequence(("sw0", "sw4")).evaluate(Progress(tabletop(0), ("sw0", "sw2")))
    assert verdict == Verdict(-1, "press 2 was sw2, expected sw4")


def test_objects_in_is_pending_then_satisfied() -> None:
    """Objects still to place keep the goal at 0; all placed make it 1."""
    world = tabletop(0)
    goal = ObjectsIn((("cube", "red_bin"), ("ball", "shelf")))
    assert goal.evaluate(Progress(world)).value == 0
    move(world, "cube", "red_bin")
    assert goal.evaluate(Progress(world)).value == 0
    move(world, "ball", "shelf")
    assert goal.evaluate(Progress(world)) == Verdict(1)


def test_objects_in_fails_on_a_wrong_bin_but_not_on_a_detour() -> None:
    """An object in another bin fails the goal; one left on the shelf does not."""
    world = tabletop(0)
    goal = ObjectsIn((("cube", "red_bin"),))
    move(world, "cube", "shelf")
    assert goal.evaluate(Progress(world)).value == 0
    move(world, "cube", "blue_bin")
    assert goal.evaluate(Progress(world)) == Verdict(
        -1, "cube was put in blue_bin instead of red_bin"
    )
    assert goal.plan(Progress(world)) is None


def test_holding_is_satisfied_by_any_robot() -> None:
    """The goal is 0 until some robot holds the object, then 1."""
    world = tabletop(0)
    goal = Holding("ball")
    assert goal.evaluate(Progress(world)).value == 0
    execute(world, ToolCall(name="take_obj", arguments={"obj": "ball"}, target_robot_name="ur5"))
    assert goal.evaluate(Progress(world)).value == 1


@pytest.mark.parametrize(
    ("say", "value"),
    [("", 0), ("   ", 0), ("red", 1), (" red\n", 1), ("Red", -1), ("red.", -1), ("blue", -1)],
)
def test_answer_is_checked_exactly(say: str, value: int) -> None:
    """Only the exact text counts (surrounding whitespace aside); no answer is still 0."""
    assert Answer("red").evaluate(Progress(tabletop(0), say=say)).value == value


def test_combine_puts_failure_before_pending_before_success() -> None:
    """Several goals: any -1 fails, any 0 keeps the stage open, all 1 completes it."""
    assert combine([Verdict(1), Verdict(-1, "bad"), Verdict(0, "wait")]) == Verdict(-1, "bad")
    assert combine([Verdict(1), Verdict(0, "wait")]) == Verdict(0, "wait")
    assert combine([Verdict(1), Verdict(1)]) == Verdict(1)


def test_placement_plan_deposes_held_objects_first() -> None:
    """A robot already holding a goal object deposes it directly, saving a take."""
    world = tabletop(0)
    execute(world, ToolCall(name="take_obj", arguments={"obj": "ball"}, target_robot_name="ur5"))
    plan = ObjectsIn((("cube", "red_bin"), ("ball", "blue_bin"))).plan(Progress(world))
    assert plan is not None
    assert [(c.target_robot_name, c.name, c.arguments) for c in plan.tool_calls] == [
        ("ur5", "depose", {"target": "blue_bin"}),
        ("panda", "take_obj", {"obj": "cube"}),
        ("panda", "depose", {"target": "red_bin"}),
    ]


def test_plans_free_a_gripper_when_every_robot_is_busy() -> None:
    """With both grippers full of other objects, the plan first puts one back on the table."""
    world = tabletop(0)
    execute(world, ToolCall(name="take_obj", arguments={"obj": "ball"}, target_robot_name="panda"))
    execute(world, ToolCall(name="take_obj", arguments={"obj": "cone"}, target_robot_name="ur5"))
    plan = Holding("cube").plan(Progress(world))
    assert plan is not None
    assert [(c.name, c.arguments) for c in plan.tool_calls] == [
        ("depose", {"target": "table"}),
        ("take_obj", {"obj": "cube"}),
    ]
