"""Stage goals: each evaluates to 1 (satisfied), 0 (not yet) or -1 (failed) and can plan.

A goal reads a `Progress`: the world, the button presses since the stage began, and what
the agent said. `plan` returns the optimal way to satisfy the goal from that state, or
None once the goal has failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from gencoach.sim.plans import Plan, call, first_robot, free_hands
from gencoach.sim.world import World

GoalValue = Literal[-1, 0, 1]


@dataclass(frozen=True)
class Progress:
    """What a stage's goals are judged on."""

    world: World
    presses: tuple[str, ...] = ()
    say: str = ""


@dataclass(frozen=True)
class Verdict:
    """A goal's value and, when it is not 1, why."""

    value: GoalValue
    reason: str = ""


class Goal(Protocol):
    """The interface every goal implements."""

    def evaluate(self, progress: Progress) -> Verdict:
        """Judge the goal on the current progress."""
        ...

    def plan(self, progress: Progress) -> Plan | None:
        """The optimal calls from here to the goal; None when it has failed."""
        ...


@dataclass(frozen=True)
class PressSequence:
    """These buttons, in this order, and no other press during the stage."""

    buttons: tuple[str, ...]

    def evaluate(self, progress: Progress) -> Verdict:
        """1 once the sequence is complete, -1 at the first press that departs from it."""
        for index, pressed in enumerate(progress.presses):
            if index >= len(self.buttons):
                return Verdict(-1, f"press {index + 1} ({pressed}) is one too many")
            if pressed != self.buttons[index]:
                expected = self.buttons[index]
                return Verdict(-1, f"press {index + 1} was {pressed}, expected {expected}")
        if len(progress.presses) == len(self.buttons):
            return Verdict(1)
        remaining = ", ".join(self.buttons[len(progress.presses) :])
        return Verdict(0, f"still to press: {remaining}")

    def plan(self, progress: Progress) -> Plan | None:
        """Press the remaining buttons with the first robot."""
        if self.evaluate(progress).value == -1:
            return None
        robot = first_robot(progress.world)
        remaining = self.buttons[len(progress.presses) :]
        return Plan(tuple(call(robot, "press_button", id=button) for button in remaining))


@dataclass(frozen=True)
class ObjectsIn:
    """Each object on its place; an object put in any other bin fails the goal."""

    targets: tuple[tuple[str, str], ...]

    def evaluate(self, progress: Progress) -> Verdict:
        """1 when every object is placed, -1 as soon as one lies in a wrong bin."""
        world = progress.world
        pending = []
        for obj_id, place in self.targets:
            where = world.objects[obj_id].place
            if where == place:
                continue
            if where is not None and world.places[where].kind == "bin":
                return Verdict(-1, f"{obj_id} was put in {where} instead of {place}")
            pending.append(f"{obj_id} → {place}")
        if not pending:
            return Verdict(1)
        return Verdict(0, "still to place: " + ", ".join(pending))

    def plan(self, progress: Progress) -> Plan | None:
        """Depose what robots already hold, then take and depose the rest."""
        if self.evaluate(progress).value == -1:
            return None
        world = progress.world
        holding = {robot.name: robot.holding for robot in world.robots.values()}
        pending = {o: p for o, p in self.targets if world.objects[o].place != p}
        plan = Plan()
        for robot, held in holding.items():
            if held is not None and held in pending:
                plan += Plan((call(robot, "depose", target=pending.pop(held)),))
                holding[robot] = None
        for obj_id, place in pending.items():
            robot, freeing = free_hands(world, holding)
            take = call(robot, "take_obj", obj=obj_id)
            plan += freeing + Plan((take, call(robot, "depose", target=place)))
        return plan


@dataclass(frozen=True)
class Holding:
    """Some robot holds this object."""

    obj: str

    def evaluate(self, progress: Progress) -> Verdict:
        """1 while a robot holds the object; this goal cannot fail."""
        if progress.world.holder(self.obj) is not None:
            return Verdict(1)
        return Verdict(0, f"no robot holds {self.obj}")

    def plan(self, progress: Progress) -> Plan | None:
        """Take the object with a robot whose hands are free."""
        world = progress.world
        if world.holder(self.obj) is not None:
            return Plan()
        holding = {robot.name: robot.holding for robot in world.robots.values()}
        robot, freeing = free_hands(world, holding)
        return freeing + Plan((call(robot, "take_obj", obj=self.obj),))


@dataclass(frozen=True)
class Answer:
    """The agent says exactly this text (surrounding whitespace aside)."""

    text: str

    def evaluate(self, progress: Progress) -> Verdict:
        """0 before any answer, then 1 for the exact text and -1 for anything else."""
        said = progress.say.strip()
        if not said:
            return Verdict(0, "no answer given")
        if said == self.text:
            return Verdict(1)
        return Verdict(-1, f"answered {said!r}, expected {self.text!r}")

    def plan(self, progress: Progress) -> Plan | None:
        """Say the expected text."""
        return Plan(say=self.text)


def combine(verdicts: Sequence[Verdict]) -> Verdict:
    """All goals together: -1 if any failed, 1 if all are satisfied, else 0."""
    for verdict in verdicts:
        if verdict.value == -1:
            return verdict
    pending = [verdict for verdict in verdicts if verdict.value == 0]
    if pending:
        return Verdict(0, "; ".join(v.reason for v in pending if v.reason))
    return Verdict(1)
