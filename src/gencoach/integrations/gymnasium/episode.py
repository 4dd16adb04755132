"""One env episode under gencoach: decisions become actions, a situation is restored by replay.

`GymEpisode` is an env at a seed after some actions (why replay, not snapshots:
`GymEpisode.restore`); `Judged` is what one decision did, as the fields the run
reports; `invalid_reason` says why a decision breaks the offered tools.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gencoach.integrations.gymnasium.adapter import Action, Event, GymAdapter, Transition
from gencoach.protocol import AgentDecision

GYM_STATE_KEY = "gym_state"
"""The `extra_keys` entry of every input `gencoach sim gym` sends: the situation's
`{adapter, seed, actions}` (its teacher state), for agents that replay it (the oracle
policy); the LLM policy never reads it, and exports never show it."""

# MAGMA Core's StageState values.
_STAGE_STATES = {"optimal": 1, "acceptable": 0, "exceeded": -1}


@dataclass(frozen=True)
class Judged:
    """What one decision did: the executed calls, the feedback, how the stage ended."""

    calls: list[tuple[str, bool, str]]
    feedback: str
    reward: float
    event: Event | None = None
    no_action: bool = False
    skipped_calls: int = 0
    reason: str = ""
    steps: int = 0

    def stage_end(self, target_steps: int) -> dict[str, str] | None:
        """The `stage_end` field: `{event, state}` or None while the stage goes on."""
        event = "no_action" if self.no_action else self.event
        if event is None:
            return None
        if event == "exceeded":
            return {"event": event, "state": "exceeded"}
        return {"event": event, "state": "optimal" if self.steps <= target_steps else "acceptable"}

    def status(self, target_steps: int) -> str:
        """The candidate status this end gives (see docs/integrations.md)."""
        end = self.stage_end(target_steps)
        if end is None:
            return "ongoing"
        if end["event"] != "success":
            return "finished"
        return "optimal" if end["state"] == "optimal" else "suboptimal"

    def execution(self, robot: str, target_steps: int) -> dict[str, Any]:
        """The `execution` field, in MAGMA-GEN's step-summary shape, with the env's reward."""
        end = self.stage_end(target_steps)
        failed = end is not None and end["event"] != "success"
        return {
            "per_robot_status": [
                {
                    "robot_name": robot,
                    "mess": message,
                    "result": ok,
                    "error_flag": "none" if ok else "bad_call",
                    "mess_is_public": False,
                }
                for _, ok, message in self.calls
            ],
            "stage_success": 0 if end is None else 1 if end["event"] == "success" else -1,
            "stage_state": _STAGE_STATES[end["state"]] if end is not None else 1,
            "tool_calls": self.steps,
            "forgiven_tool_calls": 0,
            "failure_reason": (self.reason or None) if failed else None,
            "failure_diagnostics": (
                {"event": end["event"], "skipped_calls": self.skipped_calls}
                if failed and end is not None
                else None
            ),
            "reward": self.reward,
        }


@dataclass
class GymEpisode:
    """An env at `seed` after `actions`, with the last observation."""

    adapter: GymAdapter
    seed: int
    env: Any
    observation: Any
    actions: list[Action] = field(default_factory=list)
    over: bool = False

    @classmethod
    def start(cls, adapter: GymAdapter, seed: int) -> GymEpisode:
        """A fresh env, reset with the seed."""
        env = adapter.make_env(seed)
        observation, _ = env.reset(seed=seed)
        return cls(adapter, seed, env, observation)

    @classmethod
    def restore(cls, adapter: GymAdapter, seed: int, actions: Sequence[Action]) -> GymEpisode:
        """The env of a saved situation, rebuilt by replaying its actions from the seed.

        Gymnasium has no API to save and load an env's state. Replay is exact for every
        env whose dynamics depend only on the seed and the actions (Gymnasium's contract
        for `reset(seed=...)`; the toy-text and minigrid envs keep it), and costs the
        prefix's steps, far below one agent call for these short episodes. A deep copy
        would be cheaper but is not safe for envs that hold native resources.
        """
        episode = cls.start(adapter, seed)
        for action in actions:
            episode.observation, *_ = episode.env.step(action)
        episode.actions = list(actions)
        return episode

    def text(self) -> str:
        """The observation as the agent reads it."""
        return self.adapter.describe(self.env, self.observation)

    def plan_length(self, limit: int) -> int | None:
        """How many steps the oracle needs from here (None: no oracle, or not within `limit`)."""
        probe = GymEpisode.restore(self.adapter, self.seed, self.actions)
        for count in range(1, limit + 1):
            action = self.adapter.oracle_action(probe.env, self.seed, probe.actions)
            if action is None:
                return None
            probe.observation, reward, terminated, truncated, _ = probe.env.step(action)
            probe.actions.append(action)
            if terminated or truncated:
                return count if terminated and reward > 0 else None
        return None

    def play(self, decision: AgentDecision) -> Judged:
        """Execute a valid decision's calls in order until one ends the stage."""
        if not decision.tool_calls:
            return Judged([], self.text(), 0.0, no_action=True, reason="answered without acting")
        calls: list[tuple[str, bool, str]] = []
        total = 0.0
        event: Event | None = None
        for call in decision.tool_calls:
            action = self.adapter.action(call)
            self.observation, reward, terminated, truncated, info = self.env.step(action)
            self.actions.append(action)
            total += float(reward)
            calls.append((call.name, True, f"{call.name} done"))
            step = Transition(
                self.observation, float(reward), terminated, truncated, info, len(self.actions)
            )
            event = self.adapter.judge(step)
            if event is not None:
                break
        self.over = event is not None
        reason = {"failure": "the episode ended without reward", "exceeded": "no steps left"}
        return Judged(
            calls,
            self.text(),
            total,
            event=event,
            skipped_calls=len(decision.tool_calls) - len(calls),
            reason=reason.get(event or "", ""),
            steps=len(self.actions),
        )


def invalid_reason(adapter: GymAdapter, decision: AgentDecision) -> str | None:
    """Why a decision breaks the offered tools (a `format` correction), or None."""
    if decision.say.strip() and decision.tool_calls:
        return "a decision either says something or calls tools, not both"
    for number, call in enumerate(decision.tool_calls, start=1):
        where = f"tool call {number} ({call.name})"
        try:
            tool = adapter.tool(call.name)
        except KeyError:
            offered = ", ".join(tool.name for tool in adapter.tools)
            return f"{where}: no such tool; the tools are {offered}"
        expected = [param for param, _ in tool.arguments]
        if sorted(call.arguments) != sorted(expected):
            return f"{where}: it takes the arguments {expected or 'none'}"
    return None
