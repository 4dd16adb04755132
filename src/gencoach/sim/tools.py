"""Robot tools in the MAGMA shape, and their execution against the world.

A call runs in four steps: resolve the robot, validate the arguments, check the
preconditions, then (unless the injected error fires) apply the effect. Anything refused
before the effect is a `bad_call`; the world changes only on success.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from gencoach.sim.decisions import ToolCall
from gencoach.sim.injection import INJECTION_MESSAGE
from gencoach.sim.world import Robot, StateModel, World

ErrorFlag = Literal["none", "injection_error", "bad_call", "planner_error"]

CANCEL = "cancel_current_action"


@dataclass(frozen=True)
class ToolSpec:
    """A tool as announced to the agent; every argument is a string id."""

    name: str
    description: str
    arguments: tuple[tuple[str, str], ...] = ()

    def to_magma(self) -> dict[str, Any]:
        """The MAGMA shape (see `magma_tool`)."""
        return magma_tool(self.name, self.description, self.arguments)


def magma_tool(
    name: str, description: str, arguments: tuple[tuple[str, str], ...]
) -> dict[str, Any]:
    """A tool in the MAGMA shape: `{name, description, arguments: {param: {description,
    type}}}`, every argument a string."""
    return {
        "name": name,
        "description": description,
        "arguments": {param: {"description": text, "type": "str"} for param, text in arguments},
    }


TOOLS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in (
        ToolSpec(
            "press_button",
            "Press a button once with the robot.",
            (("id", "id of the button to press, e.g. sw0"),),
        ),
        ToolSpec(
            "take_obj",
            "Take an object with the robot's gripper; the robot must hold nothing.",
            (("obj", "id of the object to take"),),
        ),
        ToolSpec(
            "depose",
            "Put the object the robot holds on a place (table, shelf or a bin).",
            (("target", "id of the place to put the held object on"),),
        ),
        ToolSpec(CANCEL, "Cancel the robot's current action."),
    )
}


class ToolResult(StateModel):
    """The result of one executed call, with the feedback line the agent reads."""

    robot: str
    tool: str
    arguments: dict[str, Any]
    result: bool
    message: str
    error_flag: ErrorFlag
    feedback_text: str


def tool_specs() -> list[dict[str, Any]]:
    """Every tool in the MAGMA shape, in a stable order."""
    return [spec.to_magma() for spec in TOOLS.values()]


def feedback_text(robot: str, tool: str, ok: bool, message: str) -> str:
    """The MAGMA feedback line: `<robot>: <tool> succeed|failed with message: …`."""
    if ok:
        return f"{robot}: {tool} succeed"
    return f"{robot}: {tool} failed with message: {message}"


def _result(call: ToolCall, robot: str, ok: bool, message: str, flag: ErrorFlag) -> ToolResult:
    return ToolResult(
        robot=robot,
        tool=call.name,
        arguments=dict(call.arguments),
        result=ok,
        message=message,
        error_flag=flag,
        feedback_text=feedback_text(robot, call.name, ok, message),
    )


def _resolve_robot(world: World, name: str) -> Robot | None:
    if not name and len(world.robots) == 1:
        return next(iter(world.robots.values()))
    return world.robots.get(name)


def _argument_error(spec: ToolSpec, arguments: dict[str, Any]) -> str | None:
    expected = [param for param, _ in spec.arguments]
    for param in arguments:
        if param not in expected:
            return f"unexpected argument '{param}'"
    for param in expected:
        if param not in arguments:
            return f"missing argument '{param}'"
        if not isinstance(arguments[param], str):
            return f"argument '{param}' must be a str"
    return None


# Each tool: a precondition check returning the refusal message, and an effect.
Check = Callable[[World, Robot, dict[str, str]], str | None]
Effect = Callable[[World, Robot, dict[str, str]], None]


def _check_press(world: World, robot: Robot, args: dict[str, str]) -> str | None:
    if args["id"] not in world.buttons:
        return f"unknown button '{args['id']}'"
    return None


def _press(world: World, robot: Robot, args: dict[str, str]) -> None:
    world.buttons[args["id"]].presses += 1
    world.press_log.append(args["id"])


def _check_take(world: World, robot: Robot, args: dict[str, str]) -> str | None:
    obj = args["obj"]
    if obj not in world.objects:
        return f"unknown object '{obj}'"
    if robot.holding is not None:
        return f"already holding {robot.holding}"
    holder = world.holder(obj)
    if holder is not None:
        return f"{obj} is held by {holder}"
    return None


def _take(world: World, robot: Robot, args: dict[str, str]) -> None:
    robot.holding = args["obj"]
    world.objects[args["obj"]].place = None


def _check_depose(world: World, robot: Robot, args: dict[str, str]) -> str | None:
    if args["target"] not in world.places:
        return f"unknown place '{args['target']}'"
    if robot.holding is None:
        return "nothing is held"
    return None


def _depose(world: World, robot: Robot, args: dict[str, str]) -> None:
    assert robot.holding is not None  # the check above guarantees it
    world.objects[robot.holding].place = args["target"]
    robot.holding = None


def _check_cancel(world: World, robot: Robot, args: dict[str, str]) -> str | None:
    return None


def _cancel(world: World, robot: Robot, args: dict[str, str]) -> None:
    robot.current_action = None


_HANDLERS: dict[str, tuple[Check, Effect]] = {
    "press_button": (_check_press, _press),
    "take_obj": (_check_take, _take),
    "depose": (_check_depose, _depose),
    CANCEL: (_check_cancel, _cancel),
}


def execute(world: World, call: ToolCall) -> ToolResult:
    """Execute one call on the world, which changes only when the call succeeds."""
    robot = _resolve_robot(world, call.target_robot_name)
    if robot is None:
        known = ", ".join(world.robots)
        message = f"unknown robot '{call.target_robot_name}'; known robots: {known}"
        return _result(call, call.target_robot_name, False, message, "bad_call")
    spec = TOOLS.get(call.name)
    if spec is None:
        return _result(call, robot.name, False, f"unknown tool '{call.name}'", "bad_call")
    refusal = _argument_error(spec, call.arguments)
    if refusal is not None:
        return _result(call, robot.name, False, refusal, "bad_call")
    args = {param: str(value) for param, value in call.arguments.items()}
    check, effect = _HANDLERS[call.name]
    refusal = check(world, robot, args)
    if refusal is not None:
        return _result(call, robot.name, False, refusal, "bad_call")
    # The built-in cancel never fails, so only real actions draw an injected error.
    if call.name != CANCEL and world.injection.fire():
        return _result(call, robot.name, False, INJECTION_MESSAGE, "injection_error")
    effect(world, robot, args)
    if call.name != CANCEL:
        detail = ", ".join(args.values())
        robot.current_action = f"{call.name}({detail})"
    return _result(call, robot.name, True, "", "none")
