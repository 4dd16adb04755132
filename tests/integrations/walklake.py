"""FrozenLake with one tool that takes an argument, `walk(direction)`, and an oracle that
answers the whole call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gencoach.integrations.gymnasium import OracleTeacher, Tool
from gencoach.protocol import ToolCall
from tests.integrations.frozenlake import FrozenLake, shortest_path

DIRECTIONS = ("left", "down", "right", "up")  # FrozenLake's actions 0 to 3


class WalkLake(FrozenLake):
    """The 4x4 lake walked with `walk(direction)`."""

    # FrozenLake (shown in the docs as it is) leaves its tools and oracle to inference:
    # four tools and an action, which this lake replaces with one tool and its call.
    tools = (  # type: ignore[assignment]
        Tool("walk", "Walk one cell.", None, (("direction", "left, down, right or up"),)),
    )

    def __init__(self, walk: bool = True) -> None:
        self.walk = walk

    def options(self) -> dict[str, Any]:
        return {"walk": self.walk}

    def action(self, call: ToolCall) -> Any:
        return DIRECTIONS.index(str(call.arguments["direction"]))

    def oracle(  # type: ignore[override]
        self, env: Any, seed: int, actions: Sequence[Any]
    ) -> ToolCall | None:
        path = shortest_path(env)
        return self.call("walk", direction=DIRECTIONS[path[0]]) if path else None


teacher = OracleTeacher(WalkLake)
"""The oracle teacher over the walk-lake."""
