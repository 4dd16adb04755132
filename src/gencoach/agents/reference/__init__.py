"""The reference agent for the reference world: scripted or LLM policy, and its coach."""

from gencoach.agents.reference.agent import (
    ReferenceOptions,
    reference_app,
    reference_info,
    reference_policy,
)
from gencoach.agents.reference.llm import LLMPolicy
from gencoach.agents.reference.mistakes import MISTAKES, Mistake, MistakeRates
from gencoach.agents.reference.reference_coach import ReferenceCoach
from gencoach.agents.reference.scripted import ScriptedPolicy
from gencoach.agents.reference.serve import serve_agent

__all__ = [
    "MISTAKES",
    "LLMPolicy",
    "Mistake",
    "MistakeRates",
    "ReferenceCoach",
    "ReferenceOptions",
    "ScriptedPolicy",
    "reference_app",
    "reference_info",
    "reference_policy",
    "serve_agent",
]
