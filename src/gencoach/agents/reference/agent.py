"""The reference agent: its announcement and app, with the scripted or the LLM policy."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from fastapi import FastAPI

from gencoach.__about__ import __version__
from gencoach.agents.app import create_agent_app
from gencoach.agents.defaults import DEFAULT_AGENT_ID, DEFAULT_LLM_ENDPOINT
from gencoach.agents.policy import Policy
from gencoach.agents.reference.llm import Answers, LLMPolicy
from gencoach.agents.reference.mistakes import MistakeRates
from gencoach.agents.reference.reference_coach import ReferenceCoach
from gencoach.agents.reference.scripted import ScriptedPolicy
from gencoach.agents.sessions import SessionStore, StructuredOutput
from gencoach.protocol import COACHING_KINDS, AgentInfo

PolicyName = Literal["scripted", "llm"]
World = Literal["reference", "babyai"]


@dataclass(frozen=True)
class ReferenceOptions:
    """What `gencoach agent serve` chooses: world, policy, its mistakes and seed, the LLM."""

    policy: PolicyName = "scripted"
    world: World = "reference"
    """Which world the scripted policy plays (`babyai`: gencoach.integrations.minigrid)."""
    rates: MistakeRates = field(default_factory=MistakeRates)
    seed: int = 0
    llm_endpoint: str = DEFAULT_LLM_ENDPOINT
    model: str | None = None
    agent_id: str = DEFAULT_AGENT_ID
    structured_output: StructuredOutput = "auto"
    """How JSON is asked for: the coach's session backends, and the LLM's JSON answers."""
    answers: Answers = "tools"
    """How the LLM policy answers: `tools` (tool calling) or `json` (a JSON decision)."""

    def __post_init__(self) -> None:
        if self.policy == "llm" and not self.model:
            raise ValueError("the llm policy needs a model (--model)")


def reference_info(agent_id: str = DEFAULT_AGENT_ID) -> AgentInfo:
    """The reference agent's announcement: every coaching kind, and text resumes."""
    return AgentInfo(
        agent_id=agent_id,
        agent_version=__version__,
        specialized_coaching=list(COACHING_KINDS),
        coaching_resume=True,
        capabilities={"tool_calls": True, "replace_decision": True, "replace_say": True},
    )


def reference_policy(options: ReferenceOptions) -> tuple[Policy, ReferenceCoach]:
    """The policy that decides, and the coach that repairs its answers: with the LLM
    policy its model decides again (`repair_model`); a scripted policy's coach decides
    again without the seeded mistakes, which no real agent can (`fallback`)."""
    if options.policy == "llm":
        assert options.model is not None
        llm = LLMPolicy(
            options.llm_endpoint,
            options.model,
            answers=options.answers,
            structured_output=options.structured_output,
        )
        return llm, ReferenceCoach(llm, "repair_model")
    if options.world == "babyai":
        from gencoach.integrations.minigrid.agent import BabyAIPolicy

        babyai = BabyAIPolicy(options.rates, options.seed)
        return babyai, ReferenceCoach(babyai.without_mistakes(), "fallback")
    scripted = ScriptedPolicy(options.rates, options.seed)
    return scripted, ReferenceCoach(scripted.without_mistakes(), "fallback")


def reference_app(options: ReferenceOptions | None = None) -> FastAPI:
    """The reference agent's FastAPI app."""
    options = options or ReferenceOptions()
    policy, coach = reference_policy(options)
    sessions = SessionStore(structured_output=options.structured_output)
    info = reference_info(options.agent_id)
    return create_agent_app(info, policy, coach, sessions=sessions)
