"""The text-rooms env as a gencoach adapter: tools that take arguments, text observations,
and an oracle that answers whole tool calls.

`TextRoomsAdapter` is the adapter (docs/integrations.md, "Second example: the text
rooms"); `rooms` is the ready one, `ROOM_TOOLS` its tools.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

from gencoach.integrations.gymnasium import GymAdapter, Tool
from gencoach.integrations.textrooms.env import ROOM_COUNT, House, TextRoomsEnv
from gencoach.protocol import ToolCall

ROOM_TOOLS = (
    Tool("go", "Walk through a door to the next room.", None, (("room", "the room to go to"),)),
    Tool("take", "Take an object lying in this room.", None, (("object", "the object"),)),
    Tool("drop", "Drop an object you carry in this room.", None, (("object", "the object"),)),
)


def _way(house: House, goal: str) -> list[str]:
    """The rooms to walk through from the player's room to `goal` (breadth first)."""
    start = house.location
    came: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        current = queue.popleft()
        for near in house.doors[current]:
            if near not in came:
                came[near] = current
                queue.append(near)
    way: list[str] = []
    room: str | None = goal
    while room is not None and room != start:
        way.append(room)
        room = came.get(room)
    return way[::-1]


def _house(env: Any) -> House:
    rooms: TextRoomsEnv = env.unwrapped
    return rooms.state


class TextRoomsAdapter(GymAdapter):
    """Carry the object to its room in a seeded house of five rooms, by text commands.

    The agent reads the mission and where it is (the doors, what lies here, what it
    carries) and acts with `go(room)`, `take(object)` and `drop(object)`; each call is the
    env's text command (`go kitchen`). The oracle walks the shortest way to the object,
    takes it, walks to the goal room and drops it, answering whole calls
    (`self.call("go", room="kitchen")`), so the teacher's expected decisions carry their
    arguments.
    """

    name = "textrooms"
    tools = ROOM_TOOLS
    thread_safe = True  # the env keeps no state outside its instance

    def __init__(self, max_steps: int = 30, rooms: int = ROOM_COUNT, decoy: bool = True) -> None:
        self.max_steps = max_steps
        self.rooms = rooms
        """The house's size: fewer rooms, a shorter way (1 room: take, drop)."""
        self.decoy = decoy
        """False: no cursed object to avoid."""

    def make_env(self, seed: int) -> Any:
        """A fresh house (its layout is drawn at `reset(seed=seed)`)."""
        return TextRoomsEnv(self.rooms, self.decoy)

    def instruction(self, env: Any, observation: Any) -> str:
        """The mission."""
        rooms: TextRoomsEnv = env
        return rooms.mission()

    def describe(self, env: Any, observation: Any) -> str:
        """The observation is already text."""
        return str(observation)

    def action(self, call: ToolCall) -> Any:
        """The env's text command: the tool's name, then its argument."""
        [value] = call.arguments.values()
        return f"{call.name} {value}"

    def options(self) -> dict[str, Any]:
        """What rebuilds this adapter (the house's size and decoy when not the default)."""
        options: dict[str, Any] = {"max_steps": self.max_steps}
        if self.rooms != ROOM_COUNT:
            options["rooms"] = self.rooms
        if not self.decoy:
            options["decoy"] = False
        return options

    def argument_choices(self, env: Any, tool: str, param: str) -> Sequence[str]:
        """Any room of the house, or any object of it (the cursed one included)."""
        house = _house(env)
        if param == "room":
            return sorted(house.doors)
        return sorted([*house.objects, *house.carrying])

    def oracle(self, env: Any, seed: int, actions: Sequence[Any]) -> ToolCall | None:
        """The next call of a shortest way to bring the object to its room."""
        house = _house(env)
        target = house.goal_object
        if target not in house.carrying:
            where = house.objects.get(target)
            if where is None:
                return None
            if where == house.location:
                return self.call("take", object=target)
            return self.call("go", room=_way(house, where)[0])
        if house.location == house.goal_room:
            return self.call("drop", object=target)
        return self.call("go", room=_way(house, house.goal_room)[0])


rooms = TextRoomsAdapter()
"""The ready adapter: `gencoach sim gym gencoach.integrations.textrooms:rooms`."""
