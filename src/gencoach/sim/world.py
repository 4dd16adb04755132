"""The tabletop world: robots, buttons, objects and places, with an exact JSON round trip."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gencoach.sim.injection import Injection

PlaceKind = Literal["table", "bin", "shelf"]


class StateModel(BaseModel):
    """Base of every serialised simulator record: unknown fields and loose types are refused."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class Robot(StateModel):
    """A robot arm; it holds at most one object at a time."""

    name: str
    holding: str | None = None
    # The last action the robot carried out; cancel_current_action clears it.
    current_action: str | None = None


class Button(StateModel):
    """A push button on the table, counting how often it was pressed."""

    id: str
    presses: int = Field(default=0, ge=0)


class Place(StateModel):
    """Somewhere an object can lie: the table, a shelf, or a bin that accepts one colour."""

    id: str
    kind: PlaceKind
    colour: str | None = None


class Obj(StateModel):
    """A coloured object; `place` is None while a robot holds it."""

    id: str
    shape: str
    colour: str
    place: str | None


class World(StateModel):
    """The whole state of the tabletop, including the injected-error generator."""

    robots: dict[str, Robot]
    buttons: dict[str, Button]
    places: dict[str, Place]
    objects: dict[str, Obj]
    press_log: list[str] = Field(default_factory=list)
    injection: Injection = Field(default_factory=Injection)

    @model_validator(mode="after")
    def _check_consistency(self) -> Self:
        for kind, table in (
            ("robot", {k: v.name for k, v in self.robots.items()}),
            ("button", {k: v.id for k, v in self.buttons.items()}),
            ("place", {k: v.id for k, v in self.places.items()}),
            ("object", {k: v.id for k, v in self.objects.items()}),
        ):
            for key, ident in table.items():
                if key != ident:
                    raise ValueError(f"{kind} {ident!r} is filed under {key!r}")
        held = {r.holding: r.name for r in self.robots.values() if r.holding is not None}
        for obj in self.objects.values():
            if obj.place is None and obj.id not in held:
                raise ValueError(f"object {obj.id!r} is nowhere: no place and no robot holds it")
            if obj.place is not None and obj.place not in self.places:
                raise ValueError(f"object {obj.id!r} lies on unknown place {obj.place!r}")
            if obj.place is not None and obj.id in held:
                raise ValueError(f"object {obj.id!r} is both on {obj.place!r} and held")
        for name in held.values():
            if self.robots[name].holding not in self.objects:
                raise ValueError(f"robot {name!r} holds an unknown object")
        return self

    def to_json(self) -> str:
        """Serialise the whole state; `World.from_json` restores it exactly."""
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> World:
        """Restore a world serialised by `to_json`."""
        return cls.model_validate_json(text)

    def holder(self, obj_id: str) -> str | None:
        """The name of the robot holding an object, or None."""
        for robot in self.robots.values():
            if robot.holding == obj_id:
                return robot.name
        return None

    def attributes(self) -> dict[str, Any]:
        """What the agent is shown of the world: ids, colours, where things are."""
        return {
            "known_robots": list(self.robots),
            "buttons": list(self.buttons),
            "places": {
                p.id: {"kind": p.kind, "colour": p.colour} if p.colour else {"kind": p.kind}
                for p in self.places.values()
            },
            "objects": {
                o.id: {"shape": o.shape, "colour": o.colour, "place": o.place}
                for o in self.objects.values()
            },
            "holding": {r.name: r.holding for r in self.robots.values()},
        }


def tabletop(
    seed: int,
    *,
    robots: Sequence[str] = ("panda", "ur5"),
    buttons: int = 6,
    shapes: Sequence[str] = ("cube", "ball", "cone"),
    colours: Sequence[str] = ("red", "blue"),
) -> World:
    """Build the standard table: buttons `sw0`…, a table, a shelf, one bin per colour, and
    one object per shape whose colour is drawn from the seed."""
    rng = random.Random(f"tabletop:{seed}")
    places = [Place(id="table", kind="table"), Place(id="shelf", kind="shelf")]
    places += [Place(id=f"{colour}_bin", kind="bin", colour=colour) for colour in colours]
    objects = [
        Obj(id=shape, shape=shape, colour=rng.choice(list(colours)), place="table")
        for shape in shapes
    ]
    return World(
        robots={name: Robot(name=name) for name in robots},
        buttons={f"sw{i}": Button(id=f"sw{i}") for i in range(buttons)},
        places={p.id: p for p in places},
        objects={o.id: o for o in objects},
        injection=Injection(seed=seed),
    )
