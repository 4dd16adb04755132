"""The reference agent's BabyAI policy: the BabyAI bot's action, with seeded mistakes.

`BabyAIPolicy` decides (its docstring says what each mistake answers), `mistaken` makes
one mistake; served by `gencoach agent serve --world babyai`.
"""

from __future__ import annotations

import json
import random
from typing import Any

from gencoach.agents.memory import Memory
from gencoach.agents.policy import Decided, PolicyError
from gencoach.agents.reference.mistakes import STALLING, Mistake, MistakeRates
from gencoach.agents.reference.scripted import input_digest
from gencoach.integrations.gymnasium import GymEpisode
from gencoach.integrations.minigrid.adapter import BabyAIAdapter
from gencoach.protocol import AgentDecision, AgentInput, JsonObject, ToolCall

_MOVES = ("turn_left", "turn_right", "forward")


def _decision(tool: str, robot: str = "agent", say: str = "") -> AgentDecision:
    return AgentDecision(say=say, tool_calls=[ToolCall(name=tool, target_robot_name=robot)])


def mistaken(kind: Mistake, right: str, rng: random.Random) -> AgentDecision:
    """The decision with this mistake instead of calling `right`."""
    if kind == "wrong_argument":
        return _decision(rng.choice([move for move in _MOVES if move != right]))
    if kind == "skipped_prerequisite":
        return _decision("pickup" if right != "pickup" else "forward")
    if kind == "malformed":
        if rng.random() < 0.5:
            return _decision(right, say=f"I will {right} now.")
        return _decision(f"move_{right}")
    if kind == "detour":
        return _decision("turn_left")
    return AgentDecision(say=STALLING)


class BabyAIPolicy:
    """Follows the BabyAI bot, one call per decision, with seeded mistakes.

    It plans by replaying the input's attributes (`level`, `seed`, `actions`) on the
    level's env and asking the bot; each candidate draws its mistake as the reference
    agent's scripted policy does (`MistakeRates`, `random.Random(f"{seed}:{digest}:{index}")`):

    | mistake                | what it answers                                  |
    | ---------------------- | ------------------------------------------------ |
    | `wrong_argument`       | another movement than the bot's                  |
    | `skipped_prerequisite` | `pickup` before reaching the object              |
    | `malformed`            | words with the call, or a misnamed tool          |
    | `detour`               | a needless `turn_left`                           |
    | `no_action`            | words without any call                           |
    """

    def __init__(self, rates: MistakeRates | None = None, seed: int = 0) -> None:
        self.rates = rates or MistakeRates()
        self.seed = seed

    def without_mistakes(self) -> BabyAIPolicy:
        """The same policy with every mistake rate at zero."""
        return BabyAIPolicy(MistakeRates(), self.seed)

    def right_tool(self, attributes: JsonObject) -> str:
        """The bot's action from the situation the attributes name, as a tool name."""
        data: Any = attributes
        try:
            adapter = BabyAIAdapter(str(data["level"]), strict=bool(data.get("strict")))
            episode = GymEpisode.restore(adapter, int(data["seed"]), list(data["actions"]))
        except (KeyError, TypeError, ValueError) as error:
            raise PolicyError("unknown_task", f"not a BabyAI situation: {error}") from error
        action = adapter.oracle(episode.env, episode.seed, episode.actions)
        tool = adapter.tool_of(action) if action is not None else None
        if tool is None:
            raise PolicyError("no_plan", f"the bot's action {action} is not an offered tool")
        return tool.name

    async def decide(self, agent_input: AgentInput, memory: Memory, count: int) -> list[Decided]:
        """`count` candidates for the situation."""
        right = self.right_tool(agent_input.attributes)
        digest = input_digest(agent_input)
        decided = []
        for index in range(count):
            rng = random.Random(f"{self.seed}:{digest}:{index}")
            mistake = self.rates.draw(rng)
            decision = mistaken(mistake, right, rng) if mistake else _decision(right)
            step: JsonObject = {
                "id": f"babyai-{digest[:12]}-{index}",
                "component": "scripted",
                "origin": "model",
                "input_elements": {"mistake": mistake},
                "output_raw": json.dumps(decision.model_dump(mode="json")),
            }
            decided.append(Decided.of(decision, internal_steps=[step]))
        return decided
