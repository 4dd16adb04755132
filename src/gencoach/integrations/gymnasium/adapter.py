"""What an integrator writes for a Gymnasium env: `GymAdapter`, its tools and its judge.

```python
class FrozenLake(GymAdapter):
    name = "frozenlake"
    tools = (Tool("left", "Move one cell left.", 0), Tool("down", "Move one cell down.", 1), ...)

    def make_env(self, seed):
        return gymnasium.make("FrozenLake-v1", map_name="4x4")

    def instruction(self, env, observation):
        return "Reach the goal G without falling into a hole H."

    def describe(self, env, observation):
        return f"You are on cell {observation}."
```

Everything else has defaults: a decision's tool calls are the env's actions in order
(`action`), a step is judged from `terminated`, `truncated` and the reward (`judge`),
the stage's target is the oracle's plan length (`oracle`, optional), and the agent sees
no attributes beyond the text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from gencoach.protocol import ToolCall
from gencoach.sim.tools import magma_tool

Event = Literal["success", "failure", "exceeded"]


@dataclass(frozen=True)
class Tool:
    """One discrete action offered to the agent as a tool.

    `arguments` maps each argument name to its description (the agent sends strings);
    an adapter whose tools take arguments overrides `GymAdapter.action` to read them.
    """

    name: str
    description: str
    action: int
    arguments: tuple[tuple[str, str], ...] = ()

    def to_magma(self) -> dict[str, Any]:
        """The MAGMA tool shape: `{name, description, arguments: {param: {description, type}}}`."""
        return magma_tool(self.name, self.description, self.arguments)


@dataclass(frozen=True)
class Transition:
    """What one env step returned, with the step count of the episode after it."""

    observation: Any
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]
    steps: int


class GymAdapter:
    """An env under gencoach: override `make_env`, `instruction`, `describe` and `tools`."""

    name: str = "gym"
    tools: Sequence[Tool] = ()
    robot: str = "agent"
    """The name tool calls address (single-agent envs have one)."""
    max_steps: int | None = None
    """Steps after which the stage is `exceeded` (None: the env's own truncation only)."""

    def make_env(self, seed: int) -> Any:
        """A fresh env for this seed (it is reset with the same seed right after)."""
        raise NotImplementedError

    def instruction(self, env: Any, observation: Any) -> str:
        """The task, as the first user message of the episode."""
        raise NotImplementedError

    def describe(self, env: Any, observation: Any) -> str:
        """The observation as text, shown after the instruction and after every step."""
        raise NotImplementedError

    def attributes(self, env: Any, seed: int, actions: Sequence[int]) -> dict[str, Any]:
        """What the agent's input carries besides text (default: nothing)."""
        return {}

    def action(self, call: ToolCall) -> int:
        """The env action a valid tool call stands for."""
        return self.tool(call.name).action

    def judge(self, step: Transition) -> Event | None:
        """How a step ends the stage: success on a positive reward at termination,
        failure on termination otherwise, exceeded on truncation or `max_steps`."""
        if step.terminated:
            return "success" if step.reward > 0 else "failure"
        if step.truncated or (self.max_steps is not None and step.steps >= self.max_steps):
            return "exceeded"
        return None

    def options(self) -> dict[str, Any]:
        """What rebuilds this adapter, saved in each teacher state (default: nothing)."""
        return {}

    def oracle(self, env: Any, seed: int, actions: Sequence[int]) -> int | None:
        """The best next action for the env, which is at `seed` after `actions`, for the
        teacher and the stage's target (None: no oracle)."""
        return None

    def tool(self, name: str) -> Tool:
        """The offered tool of this name; KeyError when none is."""
        for tool in self.tools:
            if tool.name == name:
                return tool
        raise KeyError(name)

    def tool_of(self, action: int) -> Tool | None:
        """The first tool standing for an action (for oracle decisions), or None."""
        return next((tool for tool in self.tools if tool.action == action), None)
