"""A small text env: rooms joined by doors, an object to carry to a room, a cursed decoy.

`TextRoomsEnv` is the Gymnasium env (its docstring gives the rules); `House` is one
seed's house, the env's state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium
from gymnasium import spaces

ROOMS = ("hall", "kitchen", "pantry", "study", "cellar", "attic", "garden", "library")
OBJECTS = ("red key", "blue book", "green lamp", "silver coin", "old map")
ROOM_COUNT = 5
_CHARSET = "abcdefghijklmnopqrstuvwxyz "


@dataclass
class House:
    """One seed's house: doors, where each object lies, what to bring where."""

    doors: dict[str, list[str]]
    objects: dict[str, str]
    """Object -> the room it lies in."""
    goal_object: str
    goal_room: str
    decoy: str
    location: str = "hall"
    carrying: list[str] = field(default_factory=list)


class TextRoomsEnv(gymnasium.Env[str, str]):
    """The text-rooms env: rooms joined by doors, an object to carry, a cursed decoy.

    Each seed draws a house of `ROOM_COUNT` rooms (or `rooms`, 1 to 8) joined as a tree,
    the object to bring, the room to bring it to and a cursed decoy (none with
    `decoy=False`; in a one-room house everything lies in its one room). Actions are text
    commands (a `Text` space): `go <room>`, `take <object>`, `drop <object>`.
    Observations are text. Dropping the object in the goal room ends the episode with
    reward 1; taking the decoy ends it with reward 0; any other command that cannot be
    done (a room without a door from here, an object not here) changes nothing and says
    why.
    """

    def __init__(self, rooms: int = ROOM_COUNT, decoy: bool = True) -> None:
        if not 1 <= rooms <= len(ROOMS):
            raise ValueError(f"a house has 1 to {len(ROOMS)} rooms, not {rooms}")
        self.rooms = rooms
        self.decoy = decoy
        """False: no cursed object in the house (nor in the mission)."""
        self.observation_space = spaces.Text(max_length=512, charset=_CHARSET + ".,:;'")
        self.action_space = spaces.Text(max_length=64, charset=_CHARSET)
        self.house: House | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """A new house drawn from the seed, the player in its first room."""
        super().reset(seed=seed)
        rng = self.np_random
        rooms = [str(room) for room in rng.permutation(ROOMS)[: self.rooms]]
        doors: dict[str, list[str]] = {room: [] for room in rooms}
        for index in range(1, len(rooms)):
            other = rooms[int(rng.integers(index))]
            doors[rooms[index]].append(other)
            doors[other].append(rooms[index])
        goal_object, decoy = (str(name) for name in rng.permutation(OBJECTS)[:2])
        away = rooms[1:] or rooms  # a one-room house: everything lies in its one room
        objects = {
            goal_object: away[int(rng.integers(len(away)))],
            decoy: away[int(rng.integers(len(away)))],
        }
        goal_room = str(
            rng.choice([room for room in rooms if room != objects[goal_object]] or rooms)
        )
        if not self.decoy:
            del objects[decoy]
            decoy = ""
        self.house = House(
            {room: sorted(near) for room, near in doors.items()},
            objects,
            goal_object,
            goal_room,
            decoy,
            location=rooms[0],
        )
        return self.observe(), {}

    @property
    def state(self) -> House:
        """The house; reset first."""
        if self.house is None:
            raise RuntimeError("reset the env first")
        return self.house

    def mission(self) -> str:
        """The task of this house."""
        house = self.state
        task = f"Bring the {house.goal_object} to the {house.goal_room}."
        return f"{task} Do not take the {house.decoy}: it is cursed." if house.decoy else task

    def observe(self, said: str = "") -> str:
        """Where the player is, the doors, what lies here and what is carried."""
        house = self.state
        here = [name for name, room in house.objects.items() if room == house.location]
        seen = ", ".join(f"a {name}" for name in sorted(here)) or "nothing"
        carried = ", ".join(f"a {name}" for name in house.carrying) or "nothing"
        doors = ", ".join(house.doors[house.location]) or "nowhere"
        text = (
            f"You are in the {house.location}. Doors lead to: {doors}. "
            f"You see: {seen}. You carry: {carried}."
        )
        return f"{said} {text}" if said else text

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Do one command; reward 1 when the object is dropped in the goal room."""
        house = self.state
        verb, _, target = action.strip().partition(" ")
        target = target.strip()
        if verb == "go" and target in house.doors[house.location]:
            house.location = target
            return self.observe(), 0.0, False, False, {}
        if verb == "take" and house.objects.get(target) == house.location:
            del house.objects[target]
            house.carrying.append(target)
            if target == house.decoy:
                return self.observe(f"The {target} is cursed: you faint."), 0.0, True, False, {}
            return self.observe(f"You take the {target}."), 0.0, False, False, {}
        if verb == "drop" and target in house.carrying:
            house.carrying.remove(target)
            house.objects[target] = house.location
            done = target == house.goal_object and house.location == house.goal_room
            reward = 1.0 if done else 0.0
            return self.observe(f"You drop the {target}."), reward, done, False, {}
        return self.observe(f"You cannot {action.strip()} here."), 0.0, False, False, {}
