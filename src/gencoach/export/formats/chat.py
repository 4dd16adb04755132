"""`chat`: one OpenAI-style conversation per selected example, into `chat.jsonl`.

Each row is `{"messages", "tools", "metadata"}`, as TRL's SFT trainer and
tinker-cookbook's conversation files take it. The conversation runs from the root
situation to the selected answer; every assistant message carries a `weight`, 1 for a
training target and 0 for a turn that is not one: an answer whose tool calls all
failed, one blamed by a diagnosis, or one the simulator made. A row always ends on a
target. Options:

- `per_turn` (false): one row ending at each target turn of the example's trajectory,
  only that last turn weighted 1 (a turn shared by several examples is written once);
- `min_score` (none): keep examples scoring at least this;
- `best_of` (none): per task, keep only the k best examples;
- `reasoning` (false): put the agent's internal reasoning in a thinking part before the
  text; then every message of the file uses content parts, so Arrow-based loaders see
  one type for `content`;
- `system_prompt`: the opening of the system message;
- `agents`: the producers to accept, `[{"agent_id", "agent_version"?}]` (default: any).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

from pydantic import JsonValue

from gencoach.export.formats.base import (
    SCORE_DIGITS,
    Exporter,
    Row,
    RowFailure,
    lineage,
)
from gencoach.export.formats.conversation import (
    DEFAULT_SYSTEM_PROMPT,
    Message,
    Turn,
    as_parts,
    function_tool,
    reasoning_of,
    system_message,
    turns,
)
from gencoach.export.history import Step, is_target, trajectory
from gencoach.export.inputs import example_rng, model_input
from gencoach.export.selection import Example, SelectionPolicy, candidate_score
from gencoach.graph import SavedGraph

CHANNEL = "chat"


class ChatExporter(Exporter):
    """Selected examples as chat conversations with tool calls."""

    name = "chat"
    files: ClassVar[Mapping[str, str]] = {CHANNEL: "chat.jsonl"}

    def __init__(self, options: Mapping[str, JsonValue]) -> None:
        super().__init__(options)
        self.per_turn = self._reader.flag("per_turn", False)
        self.reasoning = self._reader.flag("reasoning", False)
        self.system_prompt = self._reader.text("system_prompt", DEFAULT_SYSTEM_PROMPT)
        self._policy = SelectionPolicy(
            min_score=self._reader.number("min_score", 0),
            best_of=self._reader.count("best_of", 1),
        )
        self._reader.finish()

    @property
    def selection(self) -> SelectionPolicy:
        """Selected examples, limited by `min_score` and `best_of`."""
        return self._policy

    def rows(
        self, graph: SavedGraph, examples: Sequence[Example], shuffle_seed: int
    ) -> Iterator[Row | RowFailure]:
        """A conversation per example, or per target turn with `per_turn`."""
        written: set[int] = set()
        known: dict[int, Turn] = {}
        for example in examples:
            steps = trajectory(graph, example.candidate_id)
            if not self.per_turn:
                if is_target(steps[-1].candidate):
                    yield self._row(graph, steps, known, shuffle_seed, last_only=False)
                continue
            for end, step in enumerate(steps):
                if is_target(step.candidate) and step.candidate.id not in written:
                    written.add(step.candidate.id)
                    yield self._row(graph, steps[: end + 1], known, shuffle_seed, last_only=True)

    def _row(
        self,
        graph: SavedGraph,
        steps: Sequence[Step],
        known: dict[int, Turn],
        seed: int,
        last_only: bool,
    ) -> Row:
        last = steps[-1]
        config = graph.config
        rng = example_rng(seed, config.run_id, last.situation.id, last.candidate.id)
        seen = model_input(last.situation.input, rng)
        messages: list[Message] = [system_message(self.system_prompt, seen)]
        if self.reasoning:
            messages = [as_parts(messages[0])]
        for index, ((instruction, shared), step) in enumerate(
            zip(turns(steps, known), steps, strict=True)
        ):
            target = is_target(step.candidate) and (not last_only or index == len(steps) - 1)
            answer = {**shared, "weight": 1 if target else 0}
            if self.reasoning:
                instruction = as_parts(instruction)
                answer = as_parts(answer, reasoning_of(step.candidate))
            messages.extend((instruction, answer))
        metadata: dict[str, Any] = lineage(config, last.situation.id, last.candidate)
        metadata["score"] = round(candidate_score(last.candidate), SCORE_DIGITS)
        return Row(
            CHANNEL,
            {
                "messages": messages,
                "tools": [function_tool(tool) for tool in seen.tools],
                "metadata": metadata,
            },
        )
