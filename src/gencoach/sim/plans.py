"""Optimal plans: the calls (or the answer) that complete a stage from a given state."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gencoach.sim.decisions import ToolCall
from gencoach.sim.world import World


@dataclass(frozen=True)
class Plan:
    """The tool calls that complete a stage, in order, or the answer of a text-only stage."""

    tool_calls: tuple[ToolCall, ...] = ()
    say: str = ""

    def __add__(self, other: Plan) -> Plan:
        """Concatenate two plans: calls in order, answers joined by a space."""
        say = " ".join(part for part in (self.say, other.say) if part)
        return Plan(self.tool_calls + other.tool_calls, say)

    def decisions(self) -> list[dict[str, Any]]:
        """The plan as decisions: one call per decision, or one answer without calls."""
        if not self.tool_calls:
            return [{"say": self.say, "tool_calls": []}] if self.say else []
        return [{"say": "", "tool_calls": [call.to_dict()]} for call in self.tool_calls]

    def decision(self) -> dict[str, Any]:
        """The whole plan as a single decision."""
        return {"say": self.say, "tool_calls": [call.to_dict() for call in self.tool_calls]}


def call(robot: str, name: str, **arguments: str) -> ToolCall:
    """A tool call for a robot, e.g. `call("panda", "press_button", id="sw0")`."""
    return ToolCall(name=name, arguments=arguments, target_robot_name=robot)


def first_robot(world: World) -> str:
    """The robot plans use when any robot will do: the first one listed."""
    return next(iter(world.robots))


def free_hands(world: World, holding: dict[str, str | None]) -> tuple[str, Plan]:
    """A robot with nothing in hand, freeing the first robot on the table when none is."""
    for name, held in holding.items():
        if held is None:
            return name, Plan()
    name = first_robot(world)
    holding[name] = None
    table = next(p.id for p in world.places.values() if p.kind == "table")
    return name, Plan((call(name, "depose", target=table),))
