"""What the model saw at a situation, with the orders it must not learn shuffled.

`model_input` gives a situation's input as an example shows it (`ModelInput`); `Shuffle`
says where each example's shuffle generator comes from.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Final

from pydantic import JsonValue

from gencoach.protocol import AgentInput

JsonObject = dict[str, JsonValue]

RULES_KEY = "memory_list"
HISTORY_KEY = "history"


def example_rng(seed: int, run_id: str, *ids: int) -> random.Random:
    """The shuffle generator of one example (string seeds hash the same in every process)."""
    return random.Random(":".join([str(seed), run_id, *map(str, ids)]))


class _InOrder(random.Random):
    """A generator whose shuffles leave the order as it is."""

    def shuffle(self, x: Any) -> None:
        """Leave `x` unchanged."""


UNSHUFFLED: Final = _InOrder(0)
"""For keys that must not depend on a shuffle (e.g. which pairs a dataset already holds)."""


class Shuffle:
    """Where an example's shuffle comes from: its own generator, or one stream for all.

    By default each example gets its own generator, seeded by the shuffle seed and the
    example's identity, so the result does not depend on which other saves are exported
    alongside it or in what order. With `stream` (`--split-by folder`) one generator
    seeded by the shuffle seed serves every example in turn, saves in path order, as
    MAGMA-GEN's exporter draws them, so both tools give the same rows.
    """

    def __init__(self, seed: int, stream: bool = False) -> None:
        self.seed = seed
        self._stream = random.Random(seed) if stream else None

    def rng(self, run_id: str, *ids: int) -> random.Random:
        """The generator for the example named by `run_id` and `ids`."""
        if self._stream is not None:
            return self._stream
        return example_rng(self.seed, run_id, *ids)


@dataclass(frozen=True)
class ModelInput:
    """A situation's input as an example shows it: shuffled copies, memory split out."""

    tools: list[JsonObject]
    attributes: JsonObject
    rules: list[JsonValue]
    history: list[JsonValue] | None
    memory: JsonObject


def model_input(source: AgentInput, rng: random.Random) -> ModelInput:
    """Shuffle tools, attributes and rules; `history` is the agent's own when it keeps one.

    They reach the model in whatever order the generator kept, an order the model must not
    learn.
    """
    tools = list(source.tools)
    rng.shuffle(tools)
    items = list(source.attributes.items())
    rng.shuffle(items)
    memory = dict(source.memory)
    rules = memory.pop(RULES_KEY, None)
    if isinstance(rules, list):
        rules = list(rules)
        rng.shuffle(rules)
    else:
        if rules is not None:
            memory[RULES_KEY] = rules
        rules = []
    history = memory.pop(HISTORY_KEY, None)
    if history is not None and not isinstance(history, list):
        memory[HISTORY_KEY] = history
        history = None
    return ModelInput(
        tools=tools, attributes=dict(items), rules=rules, history=history, memory=memory
    )
