"""The named scenarios: each builds, from a seed, its world and its stages.

`SCENARIOS` holds them (its docstring says what each asks), `get_scenario` finds one by
name; a `Scenario` builds a `Task`, the world and stages of one seed.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from gencoach.errors import ConfigError, ConfigProblem
from gencoach.sim.catalog import SCENARIO_DESCRIPTIONS
from gencoach.sim.goals import Answer, Holding, ObjectsIn, PressSequence
from gencoach.sim.injection import Injection
from gencoach.sim.stages import Stage
from gencoach.sim.world import World, tabletop


@dataclass(frozen=True)
class Task:
    """A scenario instance: the starting world and the stages to play on it."""

    world: World
    stages: tuple[Stage, ...]


@dataclass(frozen=True)
class Scenario:
    """A named task family whose instances are drawn from a seed."""

    name: str
    description: str
    builder: Callable[[int], Task]

    def build(
        self, seed: int, *, injection_probability: float = 0.0, injection_shots: int = 1
    ) -> Task:
        """The instance for this seed, with the injected error configured in its world."""
        task = self.builder(seed)
        task.world.injection = Injection(
            probability=injection_probability,
            seed=seed,
            shots_per_stage=injection_shots,
            shots_left=injection_shots,
        )
        return task


def _rng(name: str, seed: int) -> random.Random:
    return random.Random(f"{name}:{seed}")


def _buttons(seed: int) -> Task:
    world = tabletop(seed)
    first, second = _rng("buttons", seed).sample(sorted(world.buttons), 2)
    stage = Stage(
        id=0,
        instruction=f"Press {first} twice, then {second}.",
        goal=f"{first}, {first} then {second} are pressed in this order, and no other button",
        hint=f"Call press_button three times: {first}, {first}, then {second}.",
        goals=(PressSequence((first, first, second)),),
        target_tool_calls=3,
        max_tool_calls=6,
    )
    return Task(world, (stage,))


def _sorting(seed: int) -> Task:
    world = tabletop(seed)
    targets = tuple((o.id, f"{o.colour}_bin") for o in world.objects.values())
    listed = ", ".join(f"{obj} in {place}" for obj, place in targets)
    stage = Stage(
        id=0,
        instruction="Sort the objects on the table into the bins of their colours.",
        goal=f"every object lies in the bin of its colour: {listed}",
        hint="For each object, take_obj then depose it in the bin of its colour;"
        " a wrong bin cannot be undone.",
        goals=(ObjectsIn(targets),),
        target_tool_calls=2 * len(targets),
        max_tool_calls=4 * len(targets),
    )
    return Task(world, (stage,))


def _two_stage(seed: int) -> Task:
    world = tabletop(seed)
    rng = _rng("two_stage", seed)
    obj = world.objects[rng.choice(sorted(world.objects))]
    bin_id = rng.choice(sorted(p.id for p in world.places.values() if p.kind == "bin"))
    take = Stage(
        id=0,
        instruction=f"Take the {obj.colour} {obj.shape}.",
        goal=f"a robot holds {obj.id}",
        hint=f"Call take_obj with obj={obj.id} on a robot whose gripper is empty.",
        goals=(Holding(obj.id),),
        target_tool_calls=1,
        max_tool_calls=3,
    )
    put = Stage(
        id=1,
        instruction=f"Now put it in the {bin_id}.",
        goal=f"{obj.id} lies in {bin_id}",
        hint=f"The robot holding {obj.id} calls depose with target={bin_id}.",
        goals=(ObjectsIn(((obj.id, bin_id),)),),
        target_tool_calls=1,
        max_tool_calls=3,
        linked_to_prev=True,
    )
    return Task(world, (take, put))


def _text_question(seed: int) -> Task:
    world = tabletop(seed)
    obj = world.objects[_rng("text_question", seed).choice(sorted(world.objects))]
    stage = Stage(
        id=0,
        instruction=f"What colour is the {obj.shape}? Answer with the colour name only.",
        goal=f"the answer is exactly {obj.colour!r}",
        hint="Read the colour in the objects' attributes and answer with say, calling no tool.",
        goals=(Answer(obj.colour),),
        target_tool_calls=0,
        max_tool_calls=0,
        text_only=True,
    )
    return Task(world, (stage,))


_BUILDERS: Mapping[str, Callable[[int], Task]] = {
    "buttons": _buttons,
    "sorting": _sorting,
    "two_stage": _two_stage,
    "text_question": _text_question,
}

SCENARIOS: Mapping[str, Scenario] = MappingProxyType(
    {
        name: Scenario(name, description, _BUILDERS[name])
        for name, description in SCENARIO_DESCRIPTIONS.items()
    }
)
"""The scenarios by name:

| name            | stages                                                            |
| --------------- | ----------------------------------------------------------------- |
| `buttons`       | press one button twice, then another; any other press fails       |
| `sorting`       | put every object in the bin of its colour; a wrong bin fails      |
| `two_stage`     | take an object, then (linked) put it in a bin                     |
| `text_question` | say an object's colour; the answer is checked exactly             |
"""


def get_scenario(name: str) -> Scenario:
    """The scenario of this name; an unknown name is a configuration error."""
    try:
        return SCENARIOS[name]
    except KeyError:
        known = ", ".join(SCENARIOS)
        problem = ConfigProblem("scenario", f"unknown scenario; known: {known}", name, True)
        raise ConfigError([problem]) from None
