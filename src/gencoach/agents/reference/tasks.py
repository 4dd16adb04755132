"""Reading a reference-world task from what the agent sees: instruction, world, history.

The stage's instruction is the input's user instruction, or the last USER entry of the
memory when the input is environment feedback. The world is rebuilt from the input's
`attributes` (the world as of this situation); the buttons pressed so far in the stage
come from the feedback JSON (`infos`, `previous_tool_call`) recorded since the instruction.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gencoach.agents.memory import HistoryEntry, Memory, entry_decision
from gencoach.agents.policy import PolicyError
from gencoach.protocol import AgentInput, JsonObject
from gencoach.sim import Answer, Holding, ObjectsIn, Plan, PressSequence, Progress, World
from gencoach.sim.goals import Goal
from gencoach.sim.tools import CANCEL


@dataclass(frozen=True)
class Situation:
    """The stage as the agent understands it."""

    instruction: str
    world: World
    presses: tuple[str, ...] = ()
    detoured: bool = False  # a needless call was already made in this stage
    text_only: bool = False


def world_from(attributes: JsonObject) -> World:
    """The world the attributes describe (`World.attributes()`'s shape), or PolicyError."""
    data: Any = attributes
    try:
        holding = data["holding"]
        world = {
            "robots": {
                name: {"name": name, "holding": holding.get(name)} for name in data["known_robots"]
            },
            "buttons": {button: {"id": button} for button in data["buttons"]},
            "places": {pid: {"id": pid, **place} for pid, place in data["places"].items()},
            "objects": {oid: {"id": oid, **obj} for oid, obj in data["objects"].items()},
        }
        return World.model_validate(world)
    except (LookupError, TypeError, AttributeError, ValueError) as error:
        message = f"the attributes do not describe a tabletop world: {error}"
        raise PolicyError("unknown_world", message) from None


def _feedback_presses(content: str) -> list[str]:
    """The buttons a feedback message reports as pressed successfully."""
    try:
        feedback = json.loads(content)
        lines = str(feedback.get("infos") or "").split("\n")
        calls = feedback.get("previous_tool_call") or []
    except (ValueError, AttributeError):
        return []
    pressed = []
    for call, line in zip(calls, lines, strict=False):
        if (
            isinstance(call, dict)
            and call.get("name") == "press_button"
            and line.endswith("succeed")
        ):
            pressed.append(str((call.get("arguments") or {}).get("id")))
    return pressed


def read_situation(agent_input: AgentInput, memory: Memory) -> Situation:
    """The stage instruction, the world and the stage's progress, or PolicyError."""
    stage: list[HistoryEntry] = []
    if agent_input.instruction.type == "user":
        instruction = agent_input.instruction.content
    else:
        stage = memory.since_instruction()
        if not stage or stage[0].author != "USER":
            raise PolicyError("no_task", "environment feedback arrived before any instruction")
        instruction = stage[0].content
        stage = [*stage[1:], HistoryEntry(author="SYSTEM", content=agent_input.instruction.content)]
    presses = [
        b for entry in stage if entry.author == "SYSTEM" for b in _feedback_presses(entry.content)
    ]
    decisions = [entry_decision(entry) for entry in stage]
    detoured = any(call.name == CANCEL for d in decisions if d for call in d.tool_calls)
    world = world_from(agent_input.attributes)
    return Situation(
        instruction.strip(),
        world,
        tuple(presses),
        detoured,
        _QUESTION.fullmatch(instruction.strip()) is not None,
    )


def _object(world: World, shape: str, colour: str | None = None) -> str:
    for obj in world.objects.values():
        if obj.shape == shape and colour in (None, obj.colour):
            return obj.id
    raise PolicyError(
        "unknown_object", f"no {colour or ''} {shape} on the table".replace("  ", " ")
    )


def _buttons(match: re.Match[str], world: World) -> Goal:
    return PressSequence((match["first"], match["first"], match["second"]))


def _sorting(match: re.Match[str], world: World) -> Goal:
    return ObjectsIn(tuple((o.id, f"{o.colour}_bin") for o in world.objects.values()))


def _take(match: re.Match[str], world: World) -> Goal:
    return Holding(_object(world, match["shape"], match["colour"]))


def _put(match: re.Match[str], world: World) -> Goal:
    held = [robot.holding for robot in world.robots.values() if robot.holding is not None]
    if not held:
        raise PolicyError("nothing_held", "no robot holds the object to put away")
    return ObjectsIn(((held[0], match["place"]),))


def _question(match: re.Match[str], world: World) -> Goal:
    return Answer(world.objects[_object(world, match["shape"])].colour)


_QUESTION = re.compile(r"What colour is the (?P<shape>\w+)\? Answer with the colour name only\.")
_TASKS: list[tuple[re.Pattern[str], Callable[[re.Match[str], World], Goal]]] = [
    (re.compile(r"Press (?P<first>\S+) twice, then (?P<second>\S+)\."), _buttons),
    (re.compile(r"Sort the objects on the table into the bins of their colours\."), _sorting),
    (re.compile(r"Take the (?P<colour>\w+) (?P<shape>\w+)\."), _take),
    (re.compile(r"Now put it in the (?P<place>\S+)\."), _put),
    (_QUESTION, _question),
]


def plan_for(situation: Situation) -> Plan:
    """The optimal plan from here, or PolicyError when the task is unknown or already failed."""
    for pattern, goal_of in _TASKS:
        match = pattern.fullmatch(situation.instruction)
        if match is None:
            continue
        goal = goal_of(match, situation.world)
        plan = goal.plan(Progress(situation.world, situation.presses))
        if plan is None:
            reason = goal.evaluate(Progress(situation.world, situation.presses)).reason
            raise PolicyError("stage_failed", f"the task can no longer be completed: {reason}")
        return plan
    raise PolicyError("unknown_task", f"not a reference-world task: {situation.instruction!r}")
