"""The oracle policy: an adapter's oracle decides, with seeded mistakes (for pipelines and tests).

`OraclePolicy` decides (its docstring says what each mistake answers on an env);
`situation_of` replays the situation an input carries.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

from gencoach.agents.memory import Memory
from gencoach.agents.policy import Decided, PolicyError
from gencoach.agents.reference.mistakes import STALLING, Mistake, MistakeRates
from gencoach.agents.reference.scripted import input_digest
from gencoach.integrations.gymnasium.adapter import GymAdapter
from gencoach.integrations.gymnasium.episode import GYM_STATE_KEY, GymEpisode
from gencoach.protocol import AgentDecision, AgentInput, JsonObject, ToolCall

# Words of the observation text a wrong argument may take (bounded, linear-time).
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,40}")


def situation_of(adapter: GymAdapter, agent_input: AgentInput) -> GymEpisode:
    """The env of the input's situation, replayed; PolicyError when the input has none."""
    state: Any = agent_input.extra_keys.get(GYM_STATE_KEY)
    try:
        rebuilt = type(adapter)(**state["adapter"])
        return GymEpisode.restore(rebuilt, int(state["seed"]), list(state["actions"]))
    except (KeyError, TypeError, ValueError) as error:
        reason = f"the input carries no usable extra_keys.{GYM_STATE_KEY} ({error!r})"
        raise PolicyError("unknown_situation", reason) from None


class OraclePolicy:
    """Follows the adapter's oracle, one call per decision, with seeded mistakes.

    It reads the situation from the input's `extra_keys["gym_state"]`, which `gencoach sim
    gym` puts in every input it sends (`{adapter, seed, actions}`, the situation's teacher
    state): it rebuilds the adapter (`type(adapter)(**state["adapter"])`), replays the env
    and calls the adapter's oracle. An LLM never sees that key; a real agent reads the
    text. Each candidate draws its mistake as the reference agent does (`MistakeRates`):

    | mistake                | what it answers                                               |
    | ---------------------- | ------------------------------------------------------------- |
    | `wrong_argument`       | the oracle's tool with another argument value (one of the     |
    |                        | adapter's `argument_choices`, else a word of the text), or    |
    |                        | another tool (tools without arguments)                        |
    | `skipped_prerequisite` | the oracle's call after next, as if the next one were done    |
    | `malformed`            | words with the call, or a misnamed tool                       |
    | `detour`               | another tool than the oracle's (any argument it takes)        |
    | `no_action`            | words without any call                                        |
    """

    def __init__(self, adapter: GymAdapter, rates: MistakeRates | None = None, seed: int = 0):
        self.adapter = adapter
        self.rates = rates or MistakeRates()
        self.seed = seed

    def without_mistakes(self) -> OraclePolicy:
        """The same policy with every mistake rate at zero (the coach's fallback)."""
        return OraclePolicy(self.adapter, MistakeRates(), self.seed)

    def right_call(self, episode: GymEpisode) -> ToolCall:
        """The oracle's call in the episode's situation, or PolicyError when it has none."""
        call = episode.adapter.oracle_call(episode.env, episode.seed, episode.actions)
        if call is None:
            raise PolicyError("no_plan", "the oracle names no call in this situation")
        return call

    async def decide(self, agent_input: AgentInput, memory: Memory, count: int) -> list[Decided]:
        """`count` candidates for the situation."""
        episode = situation_of(self.adapter, agent_input)
        right = self.right_call(episode)
        digest = input_digest(agent_input)
        decided = []
        for index in range(count):
            # The env's seed too: envs whose seeds differ may read the same (a fixed map).
            rng = random.Random(f"{self.seed}:{digest}:{episode.seed}:{index}")
            mistake = self.rates.draw(rng)
            decision = (
                self._mistaken(mistake, right, episode, agent_input, rng) if mistake else None
            )
            if decision is None:
                mistake, decision = None, AgentDecision(tool_calls=[right])
            step: JsonObject = {
                "id": f"oracle-{digest[:12]}-{index}",
                "component": "oracle",
                "origin": "model",
                "input_elements": {"mistake": mistake},
                "output_raw": json.dumps(decision.model_dump(mode="json")),
            }
            decided.append(Decided.of(decision, internal_steps=[step]))
        return decided

    def _mistaken(
        self,
        kind: Mistake,
        right: ToolCall,
        episode: GymEpisode,
        agent_input: AgentInput,
        rng: random.Random,
    ) -> AgentDecision | None:
        """The decision with this mistake, or None when it cannot be made here."""
        if kind == "no_action":
            return AgentDecision(say=STALLING)
        if kind == "malformed":
            if rng.random() < 0.5:
                return AgentDecision(say=f"I will call {right.name} now.", tool_calls=[right])
            return AgentDecision(tool_calls=[right.model_copy(update={"name": f"do_{right.name}"})])
        if kind == "skipped_prerequisite":
            return _after_next(episode, right)
        if kind == "wrong_argument" and right.arguments:
            param = rng.choice(sorted(right.arguments))
            adapter = episode.adapter
            said = adapter.argument_choices(episode.env, right.name, param)
            words = list(said) or sorted(set(_WORD.findall(agent_input.instruction.content)))
            return _other_value(right, param, words, rng)
        return _other_tool(episode.adapter, right, rng)


def _after_next(episode: GymEpisode, right: ToolCall) -> AgentDecision | None:
    """The oracle's call one step later, as if `right` had been made."""
    adapter = episode.adapter
    probe = GymEpisode.restore(adapter, episode.seed, episode.actions)
    action = adapter.action(right)
    *_, terminated, truncated, _ = probe.env.step(action)
    if terminated or truncated:
        return None
    later = adapter.oracle_call(probe.env, probe.seed, [*probe.actions, action])
    return AgentDecision(tool_calls=[later]) if later is not None and later != right else None


def _other_value(
    right: ToolCall, param: str, words: list[str], rng: random.Random
) -> AgentDecision | None:
    """The call with argument `param` changed to another of `words`."""
    others = [word for word in words if word != right.arguments[param]]
    if not others:
        return None
    arguments = {**right.arguments, param: rng.choice(others)}
    return AgentDecision(tool_calls=[right.model_copy(update={"arguments": arguments})])


def _other_tool(adapter: GymAdapter, right: ToolCall, rng: random.Random) -> AgentDecision | None:
    """A call of another offered tool, its arguments taken from the right call's values."""
    others = [tool for tool in adapter.tools if tool.name != right.name]
    if not others:
        return None
    tool = rng.choice(others)
    values = list(right.arguments.values()) or ["?"]
    arguments = {
        param: right.arguments.get(param, values[number % len(values)])
        for number, (param, _) in enumerate(tool.arguments)
    }
    return AgentDecision(tool_calls=[adapter.call(tool.name, **arguments)])
