"""A small generator for tests: plays a reference episode against an agent over HTTP."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

from gencoach.agent_client import AgentClient
from gencoach.protocol import AgentDecision, AgentOutput, AgentRequest
from gencoach.sim import Episode, Outcome


def situation_input(episode: Episode, instruction: dict[str, str], memory: Any) -> dict[str, Any]:
    """The input the reference generator shows the agent in this situation."""
    return {
        "id": 0,
        "instruction": instruction,
        "tools": episode.tools(),
        "attributes": episode.attributes(),
        "memory": memory,
        "num_outputs": 1,
        "extra_keys": {},
    }


async def ask(url: str, item: dict[str, Any]) -> AgentOutput:
    """One candidate for one input, validated by gencoach's client."""
    request = AgentRequest.parse({"request_id": f"play-{uuid.uuid4().hex}", "inputs": [item]})
    async with httpx.AsyncClient(timeout=10) as http:
        answer = await AgentClient(url, http).respond(request)
    return answer.root[0]


@dataclass
class Played:
    """What an episode did: each decision, and each decision's outcome."""

    decisions: list[AgentDecision] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    finished: bool = False

    @property
    def last(self) -> Outcome:
        """The last decision's outcome."""
        return self.outcomes[-1]


async def play(url: str, scenario: str, seed: int, max_decisions: int = 20) -> Played:
    """Play until the episode is over (or `max_decisions`), as the reference generator does."""
    episode = Episode.start(scenario, seed)
    instruction = {"type": "user", "content": episode.instruction()}
    memory: Any = {}
    played = Played()
    for _ in range(max_decisions):
        output = await ask(url, situation_input(episode, instruction, memory))
        assert output.output is not None, output.error
        played.decisions.append(output.output)
        memory = output.memory
        step = episode.step(output.output.model_dump(mode="json"))
        played.outcomes.append(step.outcome)
        if episode.finished:
            played.finished = True
            break
        if step.outcome.stage_end is not None:
            instruction = {"type": "user", "content": episode.instruction()}
        else:
            instruction = {"type": "env", "content": json.dumps(step.feedback)}
    return played
