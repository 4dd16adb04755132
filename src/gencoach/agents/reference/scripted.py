"""The scripted policy: solves the reference scenarios, with seeded, configurable mistakes.

Each candidate draws its mistake from `random.Random(f"{seed}:{digest}:{index}")`, where
`digest` hashes the input (instruction, memory, attributes, tools; not its id): the same
situation gets the same candidates in every run, whatever request carries it.
"""

from __future__ import annotations

import hashlib
import json
import random

from gencoach.agents.memory import Memory
from gencoach.agents.policy import Decided
from gencoach.agents.reference.mistakes import MistakeRates, mistaken_decision, right_decision
from gencoach.agents.reference.tasks import plan_for, read_situation
from gencoach.protocol import AgentInput, JsonObject


def input_digest(agent_input: AgentInput) -> str:
    """A stable hash of what the agent sees in an input."""
    seen = agent_input.model_dump(
        mode="json", include={"instruction", "memory", "attributes", "tools"}
    )
    return hashlib.sha256(json.dumps(seen, sort_keys=True).encode()).hexdigest()


class ScriptedPolicy:
    """Follows the reference world's optimal plan, one tool call per decision."""

    def __init__(self, rates: MistakeRates | None = None, seed: int = 0) -> None:
        self.rates = rates or MistakeRates()
        self.seed = seed

    def without_mistakes(self) -> ScriptedPolicy:
        """The same policy with every mistake rate at zero."""
        return ScriptedPolicy(MistakeRates(), self.seed)

    async def decide(self, agent_input: AgentInput, memory: Memory, count: int) -> list[Decided]:
        """`count` candidates; an unknown task or a failed stage raises PolicyError."""
        situation = read_situation(agent_input, memory)
        plan = plan_for(situation)
        digest = input_digest(agent_input)
        decided = []
        for index in range(count):
            rng = random.Random(f"{self.seed}:{digest}:{index}")
            mistake = self.rates.draw(rng)
            decision = mistaken_decision(mistake, situation, plan, rng) if mistake else None
            if decision is None:
                mistake, decision = None, right_decision(plan)
            step: JsonObject = {
                "id": f"scripted-{digest[:12]}-{index}",
                "component": "scripted",
                "origin": "model",
                "full_prompt": situation.instruction,
                "input_elements": {"mistake": mistake},
                "output_raw": json.dumps(decision.model_dump(mode="json")),
            }
            decided.append(Decided.of(decision, internal_steps=[step]))
        return decided
