"""What an integrator writes for a Gymnasium env: `GymAdapter`, its tools and its judge.

`GymAdapter` is the class to subclass (docs/integrations.md §1 shows the FrozenLake one
and every member's default); `Tool` is one env action offered to the agent, `Transition`
one env step as `GymAdapter.judge` reads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from gencoach.protocol import ToolCall
from gencoach.sim.tools import magma_tool

Event = Literal["success", "failure", "exceeded"]
Action = Any
"""An env action: what `env.step` takes, kept in JSON as it is (an int for a `Discrete`
space, a string for a `Text` one...): the teacher state saves the actions taken."""


@dataclass(frozen=True)
class Tool:
    """One discrete action offered to the agent as a tool.

    `arguments` maps each argument name to its description (the agent sends strings);
    an adapter whose tools take arguments overrides `GymAdapter.action` to read them
    (`action` is then what the adapter makes of it, e.g. None).
    """

    name: str
    description: str
    action: Action
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
    """An env under gencoach: override `make_env`, `instruction`, `describe` and `tools`.

    Everything else has a default: a decision's tool calls are the env's actions in order
    (`action`), a step is judged from `terminated`, `truncated` and the reward (`judge`),
    the stage's target is the oracle's plan length (`oracle`, optional), and the agent
    sees no attributes beyond the text.
    """

    name: str = "gym"
    tools: Sequence[Tool] = ()
    robot: str = "agent"
    """The name tool calls address (single-agent envs have one)."""
    max_steps: int | None = None
    """Steps after which the stage is `exceeded` (None: the env's own truncation only)."""
    thread_safe: bool = False
    """Whether separate envs of this adapter may be stepped in concurrent threads. The
    oracle teacher runs in worker threads (one per job in flight): unless this is True,
    it replays one job at a time in each worker process."""

    def make_env(self, seed: int) -> Any:
        """A fresh env for this seed (it is reset with the same seed right after)."""
        raise NotImplementedError

    def instruction(self, env: Any, observation: Any) -> str:
        """The task, as the first user message of the episode."""
        raise NotImplementedError

    def describe(self, env: Any, observation: Any) -> str:
        """The observation as text, shown after the instruction and after every step."""
        raise NotImplementedError

    def attributes(self, env: Any, seed: int, actions: Sequence[Action]) -> dict[str, Any]:
        """What the agent's input carries besides text (default: nothing)."""
        return {}

    def action(self, call: ToolCall) -> Action:
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

    def oracle(self, env: Any, seed: int, actions: Sequence[Action]) -> Action | ToolCall | None:
        """The best next action for the env, which is at `seed` after `actions`, or the
        whole tool call (`self.call(...)`), for the teacher, the stage's target and the
        oracle policy (None: no oracle).

        Answer a whole call when tools take arguments: the teacher's expected decision is
        then that call, arguments included."""
        return None

    def argument_choices(self, env: Any, tool: str, param: str) -> Sequence[str]:
        """Values the argument may take in this situation, for the oracle policy's
        `wrong_argument` mistakes (default: none said, the words of the text are tried)."""
        return ()

    def call(self, name: str, **arguments: Any) -> ToolCall:
        """A call of the offered tool `name` with these arguments, addressed to `robot`."""
        self.tool(name)
        return ToolCall(name=name, arguments=arguments, target_robot_name=self.robot)

    def oracle_call(self, env: Any, seed: int, actions: Sequence[Action]) -> ToolCall | None:
        """The oracle's answer as a tool call (None: no oracle, or no tool for its action)."""
        best = self.oracle(env, seed, actions)
        if best is None or isinstance(best, ToolCall):
            return best
        tool = self.tool_of(best)
        return self.call(tool.name) if tool is not None else None

    def oracle_action(self, env: Any, seed: int, actions: Sequence[Action]) -> Action | None:
        """The oracle's answer as an env action (None: no oracle)."""
        best = self.oracle(env, seed, actions)
        return self.action(best) if isinstance(best, ToolCall) else best

    def tool(self, name: str) -> Tool:
        """The offered tool of this name; KeyError when none is."""
        for tool in self.tools:
            if tool.name == name:
                return tool
        raise KeyError(name)

    def tool_of(self, action: Action) -> Tool | None:
        """The first tool standing for an action (for oracle decisions), or None."""
        return next((tool for tool in self.tools if tool.action == action), None)
