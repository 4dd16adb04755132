"""The BabyAI levels of Farama's minigrid as a gencoach adapter, with the BabyAI bot as oracle.

`BabyAIAdapter(level)` plays `BabyAI-<level>-v0` (docs/integrations.md, "Worked example:
BabyAI"); `view_text` is what its agent reads; `go_to_local`, `pickup_dist`,
`open_red_door` and `put_next_local` are ready adapters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium
from minigrid.core.constants import IDX_TO_COLOR, IDX_TO_OBJECT, STATE_TO_IDX
from minigrid.utils.baby_ai_bot import BabyAIBot

from gencoach.integrations.gymnasium import GymAdapter, Tool

LEVELS = ("GoToLocal", "PickupDist", "OpenRedDoor", "PutNextLocal")
"""The levels gencoach's tests and demo play (any BabyAI level name works)."""

TOOLS = (
    Tool("turn_left", "Turn left, staying on the same cell.", 0),
    Tool("turn_right", "Turn right, staying on the same cell.", 1),
    Tool("forward", "Move one cell forward (a wall or an object blocks it).", 2),
    Tool("pickup", "Pick up the object in the cell ahead (hands must be empty).", 3),
    Tool("drop", "Drop the carried object in the empty cell ahead.", 4),
    Tool("toggle", "Open or close the door in the cell ahead.", 5),
)
# minigrid's bot is untyped.
_BOT: Any = BabyAIBot
_STATES = {index: name for name, index in STATE_TO_IDX.items()}
_HIDDEN = {"unseen", "empty", "floor", "wall", "agent"}
_VIEW_X, _VIEW_Y = 3, 6  # where the agent stands in its own 7x7 view, facing up


def _where(x: int, y: int) -> str:
    ahead, side = _VIEW_Y - y, x - _VIEW_X
    parts = []
    if ahead:
        parts.append(f"{ahead} ahead")
    if side:
        parts.append(f"{abs(side)} to the {'right' if side > 0 else 'left'}")
    return " and ".join(parts) or "here"


def _thing(kind: str, colour: str, state: int) -> str:
    text = f"{colour} {kind}"
    return f"{_STATES.get(state, 'closed')} {text}" if kind == "door" else text


def view_text(env: Any, observation: dict[str, Any]) -> str:
    """The egocentric view as text: objects with where they are, the cell ahead, the load."""
    image = observation["image"]
    seen: list[str] = []
    for y in range(image.shape[1]):
        for x in range(image.shape[0]):
            kind = IDX_TO_OBJECT[int(image[x, y, 0])]
            if kind not in _HIDDEN:
                colour = IDX_TO_COLOR[int(image[x, y, 1])]
                seen.append(f"a {_thing(kind, colour, int(image[x, y, 2]))} {_where(x, y)}")
    ahead = IDX_TO_OBJECT[int(image[_VIEW_X, _VIEW_Y - 1, 0])]
    carrying = env.unwrapped.carrying
    load = f"a {carrying.color} {carrying.type}" if carrying is not None else "nothing"
    objects = "; ".join(seen) if seen else "no object"
    return f"You see {objects}. Ahead of you: {ahead}. You carry {load}."


class BabyAIAdapter(GymAdapter):
    """One BabyAI level (`BabyAI-<level>-v0`), coached with the BabyAI bot as oracle.

    The agent reads the mission and a text view of what it sees (the 7x7 egocentric view:
    each object with its colour and where it is, the cell ahead, what is carried) and acts
    with six tools (`turn_left`, `turn_right`, `forward`, `pickup`, `drop`, `toggle`). The
    oracle is minigrid's own `BabyAIBot`, planning from the env's state.
    """

    tools = TOOLS

    def __init__(
        self,
        level: str = "GoToLocal",
        max_steps: int | None = None,
        strict: bool = False,
        planner_attributes: bool = True,
    ) -> None:
        self.level = level
        self.name = f"babyai-{level.lower()}{'-strict' if strict else ''}"
        self.max_steps = max_steps
        self.strict = strict
        self.planner_attributes = planner_attributes

    def make_env(self, seed: int) -> Any:
        """The level's env (minigrid registers the BabyAI ids on import); `strict` makes a
        wrong pickup or door end the episode unrewarded (the level's `debug` mode)."""
        options = {"debug": True} if self.strict else {}
        return gymnasium.make(f"BabyAI-{self.level}-v0", **options)

    def instruction(self, env: Any, observation: Any) -> str:
        """The level's mission."""
        return f"Your mission: {observation['mission']}."

    def describe(self, env: Any, observation: Any) -> str:
        """What the agent sees."""
        return view_text(env, observation)

    def attributes(self, env: Any, seed: int, actions: Sequence[int]) -> dict[str, Any]:
        """The level, seed and actions so far, for a scripted agent's planner (nothing
        without `planner_attributes`: an LLM agent reads the text, and so do exports)."""
        if not self.planner_attributes:
            return {}
        return {"level": self.level, "strict": self.strict, "seed": seed, "actions": list(actions)}

    def options(self) -> dict[str, Any]:
        """What rebuilds this adapter (`BabyAIAdapter(**options)`)."""
        return {
            "level": self.level,
            "max_steps": self.max_steps,
            "strict": self.strict,
            "planner_attributes": self.planner_attributes,
        }

    def oracle(self, env: Any, seed: int, actions: Sequence[int]) -> int | None:
        """The BabyAI bot's next action, advising along the actions taken since the reset.

        The bot keeps a plan and a memory of what it saw, so it walks the episode again
        beside a replayed env: told each action that differed from its suggestion, it
        plans how to make up for it, as in BabyAI's advising mode.
        """
        replay = self.make_env(seed)
        replay.reset(seed=seed)
        bot = _BOT(replay.unwrapped)
        suggested = bot.replan()
        for action in actions:
            replay.step(action)
            suggested = bot.replan(None if action == suggested else action)
        return int(suggested)


go_to_local = BabyAIAdapter("GoToLocal")
pickup_dist = BabyAIAdapter("PickupDist")
open_red_door = BabyAIAdapter("OpenRedDoor")
put_next_local = BabyAIAdapter("PutNextLocal")
