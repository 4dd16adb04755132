"""An agent for any adapter: `gencoach agent serve --env MODULE:ADAPTER`.

The starting point to copy for an agent of your own (docs/integrations.md §7):
`env_app` serves a MAGMA Core 2.0 agent whose tools are the adapter's, deciding with
the policy `env_policy` picks from `EnvAgentOptions` and repairing with its coach.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

from fastapi import FastAPI

from gencoach.agents.app import create_agent_app
from gencoach.agents.defaults import DEFAULT_LLM_ENDPOINT
from gencoach.agents.policy import Policy
from gencoach.agents.reference.agent import reference_info
from gencoach.agents.reference.llm import Answers, LLMPolicy
from gencoach.agents.reference.mistakes import MistakeRates
from gencoach.agents.reference.reference_coach import ReferenceCoach
from gencoach.agents.sessions import SessionStore, StructuredOutput
from gencoach.integrations.gymnasium.adapter import GymAdapter
from gencoach.integrations.gymnasium.oracle_policy import OraclePolicy
from gencoach.protocol import AgentInput

DEFAULT_ENV_AGENT_ID = "gencoach-env"
_SYSTEM = (
    "You are an agent acting in an environment. Read the task and what you observe, then "
    "act by calling exactly one of the tools, with the arguments it takes. Never answer "
    "with text and a tool call together."
)


@dataclass(frozen=True)
class EnvAgentOptions:
    """What `gencoach agent serve --env` chooses: the policy, its mistakes or its model."""

    policy: Literal["oracle", "llm"] = "oracle"
    rates: MistakeRates = field(default_factory=MistakeRates)
    """The oracle policy's mistake rates."""
    seed: int = 0
    llm_endpoint: str = DEFAULT_LLM_ENDPOINT
    model: str | None = None
    answers: Answers = "tools"
    """How the LLM answers: `tools` (tool calling) or `json` (a JSON decision)."""
    structured_output: StructuredOutput = "auto"
    """How JSON is asked for: the policy's JSON answers, and the coach's backends."""
    agent_id: str = DEFAULT_ENV_AGENT_ID

    def __post_init__(self) -> None:
        if self.policy == "llm" and not self.model:
            raise ValueError("the llm policy needs a model (--model)")


def env_system_prompt(agent_input: AgentInput) -> str:
    """What the LLM is told besides the env's text: how to act, and any attributes."""
    if not agent_input.attributes:
        return _SYSTEM
    known = json.dumps(agent_input.attributes)
    return f"{_SYSTEM}\nWhat you know of the environment (JSON): {known}"


def env_policy(adapter: GymAdapter, options: EnvAgentOptions) -> tuple[Policy, ReferenceCoach]:
    """The policy that decides and the coach that repairs its answers.

    `oracle`: the adapter's oracle with seeded mistakes (`OraclePolicy`), for pipelines
    and tests; `llm`: any OpenAI-compatible endpoint (`LLMPolicy`: tool calling, or JSON
    answers with the backends' structured-output fallback), prompted with the env's text
    alone. The coach (`ReferenceCoach`) repairs a decision with, in order, the
    diagnosis's expected decision, the session's backends, then the policy deciding again
    (the LLM: `repair_model`; the oracle without its mistakes: `fallback`).
    """
    if options.policy == "llm":
        assert options.model is not None
        llm = LLMPolicy(
            options.llm_endpoint,
            options.model,
            answers=options.answers,
            structured_output=options.structured_output,
            robot=adapter.robot,
            system_prompt=env_system_prompt,
        )
        return llm, ReferenceCoach(llm, "repair_model")
    oracle = OraclePolicy(adapter, options.rates, options.seed)
    return oracle, ReferenceCoach(oracle.without_mistakes(), "fallback")


def env_app(adapter: GymAdapter, options: EnvAgentOptions | None = None) -> FastAPI:
    """The agent's FastAPI app for this adapter's env: a MAGMA Core 2.0 agent announcing
    every coaching kind, whose tools are the adapter's (they come in every input)."""
    options = options or EnvAgentOptions()
    policy, coach = env_policy(adapter, options)
    sessions = SessionStore(structured_output=options.structured_output)
    return create_agent_app(reference_info(options.agent_id), policy, coach, sessions=sessions)
