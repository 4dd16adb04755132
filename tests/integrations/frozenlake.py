"""FrozenLake (Gymnasium toy-text) under gencoach: the whole adapter an integrator writes."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

import gymnasium

from gencoach import GymAdapter, Tool

MOVES = {0: (0, -1), 1: (1, 0), 2: (0, 1), 3: (-1, 0)}  # left, down, right, up: (row, col)


class FrozenLake(GymAdapter):
    """The 4x4 lake, not slippery: reach G without stepping into a hole H."""

    name = "frozenlake"
    tools = (
        Tool("left", "Move one cell left.", 0),
        Tool("down", "Move one cell down.", 1),
        Tool("right", "Move one cell right.", 2),
        Tool("up", "Move one cell up.", 3),
    )
    max_steps = 20

    def make_env(self, seed: int) -> Any:
        return gymnasium.make("FrozenLake-v1", map_name="4x4", is_slippery=False)

    def instruction(self, env: Any, observation: Any) -> str:
        rows = "\n".join(b"".join(row).decode() for row in _grid(env))
        return f"Walk from S to G on this lake; H is a hole.\n{rows}"

    def describe(self, env: Any, observation: Any) -> str:
        row, col = divmod(int(observation), 4)
        return f"You are on row {row}, column {col}."

    def oracle(self, env: Any, seed: int, actions: Sequence[int]) -> int | None:
        path = shortest_path(env)
        return path[0] if path else None


def _grid(env: Any) -> Any:
    return env.unwrapped.desc


def shortest_path(env: Any) -> list[int] | None:
    """The actions of a shortest safe walk from the agent's cell to G (breadth first)."""
    grid = _grid(env)
    start = divmod(int(env.unwrapped.s), 4)
    seen, queue = {start}, deque([(start, list[int]())])
    while queue:
        (row, col), path = queue.popleft()
        if grid[row][col] == b"G":
            return path
        for action, (d_row, d_col) in MOVES.items():
            cell = (row + d_row, col + d_col)
            inside = 0 <= cell[0] < 4 and 0 <= cell[1] < 4
            if inside and cell not in seen and grid[cell[0]][cell[1]] != b"H":
                seen.add(cell)
                queue.append((cell, [*path, action]))
    return None
