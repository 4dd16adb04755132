"""An agent's memory: its history of messages and its rules, rebuilt after each decision.

`Memory` is what travels in every input and comes back in every output (its docstring
shows the shape); `instruction_entry`, `decision_entry` and `entry_decision` convert
messages to history entries and back; `coached_decision` reads a reinjected correction.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import ConfigDict, Field

from gencoach.errors import ContractError
from gencoach.protocol import (
    COACHING_KEY,
    AgentDecision,
    AgentInput,
    AgentInstruction,
    ContractModel,
    JsonObject,
    ReplaceDecision,
    parse_coaching_payload,
)

Author = Literal["USER", "SYSTEM", "MODEL"]


class HistoryEntry(ContractModel):
    """One message of the agent's history."""

    author: Author
    content: str


class Memory(ContractModel):
    """The memory an agent built with this toolkit carries: history and permanent rules.

    It travels in every AgentInput and comes back, whole, in every AgentOutput:

    ```json
    {"history": [{"author": "USER", "content": "Press sw1."},
                 {"author": "MODEL", "content": "{\"say\": \"\", \"tool_calls\": [...]}"}],
     "memory_list": ["always answer in English"]}
    ```

    A user instruction is recorded as USER, environment feedback as SYSTEM, a decision as
    MODEL (the decision as JSON). Keys the toolkit does not know travel unchanged.
    """

    model_config = ConfigDict(extra="allow")

    history: list[HistoryEntry] = Field(default_factory=list)
    memory_list: list[str] = Field(default_factory=list)

    @classmethod
    def of(cls, agent_input: AgentInput) -> Memory:
        """The input's memory; a malformed history or rule list raises ContractError."""
        return cls.parse(agent_input.memory)

    def to_json(self) -> JsonObject:
        """The memory as the wire carries it."""
        return self.model_dump(mode="json")

    def after(self, instruction: AgentInstruction, decision: AgentDecision) -> Memory:
        """The memory once `decision` answered `instruction`: both appended to the history."""
        entries = [instruction_entry(instruction), decision_entry(decision)]
        return self.model_copy(update={"history": [*self.history, *entries]})

    def since_instruction(self) -> list[HistoryEntry]:
        """The entries from the last USER instruction on (the whole history if there is none)."""
        for index in range(len(self.history) - 1, -1, -1):
            if self.history[index].author == "USER":
                return self.history[index:]
        return list(self.history)


def instruction_entry(instruction: AgentInstruction) -> HistoryEntry:
    """A user instruction as USER, environment feedback as SYSTEM."""
    author: Author = "USER" if instruction.type == "user" else "SYSTEM"
    return HistoryEntry(author=author, content=instruction.content)


def decision_entry(decision: AgentDecision) -> HistoryEntry:
    """A decision as a MODEL entry holding its JSON."""
    return HistoryEntry(author="MODEL", content=json.dumps(decision.model_dump(mode="json")))


def entry_decision(entry: HistoryEntry) -> AgentDecision | None:
    """The decision a MODEL entry records, or None for other entries and unreadable ones."""
    if entry.author != "MODEL":
        return None
    try:
        return AgentDecision.parse_json(entry.content)
    except ContractError:
        return None


def coached_decision(agent_input: AgentInput) -> AgentDecision | None:
    """The decision a reinjection imposes (`replace_decision`, or `replace_say` as words alone).

    None when the input carries no correction; a malformed payload raises ContractError.
    """
    if COACHING_KEY not in agent_input.extra_keys:
        return None
    payload = parse_coaching_payload(agent_input.extra_keys[COACHING_KEY])
    if isinstance(payload, ReplaceDecision):
        return payload.decision
    return AgentDecision(say=payload.text)
