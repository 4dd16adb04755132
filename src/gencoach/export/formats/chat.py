"""`chat`: one OpenAI-style conversation per selected example, into `chat.jsonl`.

Each row is `{"messages", "tools", ...metadata}` in the shape tinker-cookbook's
conversation files and TRL's SFT trainer read: `messages` with `tool_calls` (JSON-string
arguments) and `tool` messages answering them by `tool_call_id`, `tools` as the model
saw them, and the row's lineage in top-level keys trainers ignore (`run_id`, `scenario`,
`target`, `situation_id`, `candidate_id`, `attempt_ids`, `origin`, `score`, `coached`).
The conversation runs from the root situation to the selected answer and always ends on
a training target. Every message carries `trainable` (tinker-cookbook's
`train_on_what=customized`): true on the assistant messages to learn, false elsewhere,
and false on an answer that is not a target: one whose tool calls all failed, one blamed
by a diagnosis, or one the simulator made. Options:

- `per_turn` (false): one row ending at each target turn of the example's trajectory,
  only that last turn trainable (a turn shared by several examples is written once);
- `min_score` (none): keep examples scoring at least this;
- `best_of` (none): per task, keep only the k best examples;
- `reasoning` (false): put the agent's internal reasoning in a thinking part before the
  text; then every message of the file uses content parts, so Arrow-based loaders see
  one type for `content`;
- `flavour` (`"tinker"`): `"axolotl"` marks messages with Axolotl's per-message
  `weight` (1 or 0, read with `message_field_training: weight`) instead of `trainable`;
- `system_prompt`: the opening of the system message;
- `agents`: the producers to accept, `[{"agent_id", "agent_version"?}]` (default: any).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar, Final

from pydantic import JsonValue

from gencoach.errors import ExportError
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
from gencoach.export.inputs import Shuffle, model_input
from gencoach.export.selection import Example, SelectionPolicy, candidate_score
from gencoach.graph import SavedGraph

CHANNEL = "chat"
FLAVOURS: Final = ("tinker", "axolotl")
"""tinker: `trainable` true/false on every message; axolotl: `weight` 1/0 instead."""


class ChatExporter(Exporter):
    """Selected examples as chat conversations with tool calls."""

    name = "chat"
    files: ClassVar[Mapping[str, str]] = {CHANNEL: "chat.jsonl"}

    def __init__(self, options: Mapping[str, JsonValue]) -> None:
        super().__init__(options)
        self.per_turn = self._reader.flag("per_turn", False)
        self.reasoning = self._reader.flag("reasoning", False)
        self.system_prompt = self._reader.text("system_prompt", DEFAULT_SYSTEM_PROMPT)
        self.flavour = self._reader.text("flavour", "tinker")
        if self.flavour not in FLAVOURS:
            known = ", ".join(repr(name) for name in FLAVOURS)
            raise ExportError(
                f"option 'flavour' of format 'chat' must be one of {known}, got {self.flavour!r}"
            )
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
        self, graph: SavedGraph, examples: Sequence[Example], shuffle: Shuffle
    ) -> Iterator[Row | RowFailure]:
        """A conversation per example, or per target turn with `per_turn`."""
        written: set[int] = set()
        known: dict[int, Turn] = {}
        for example in examples:
            steps = trajectory(graph, example.candidate_id)
            if not self.per_turn:
                if is_target(steps[-1].candidate):
                    yield self._row(graph, steps, known, shuffle, last_only=False)
                continue
            for end, step in enumerate(steps):
                if is_target(step.candidate) and step.candidate.id not in written:
                    written.add(step.candidate.id)
                    yield self._row(graph, steps[: end + 1], known, shuffle, last_only=True)

    def _mark(self, message: Message, trainable: bool) -> Message:
        """A copy of the message with the flavour's training mark."""
        if self.flavour == "axolotl":
            return {**message, "weight": 1 if trainable else 0}
        return {**message, "trainable": trainable}

    def _row(
        self,
        graph: SavedGraph,
        steps: Sequence[Step],
        known: dict[int, Turn],
        shuffle: Shuffle,
        last_only: bool,
    ) -> Row:
        last = steps[-1]
        config = graph.config
        rng = shuffle.rng(config.run_id, last.situation.id, last.candidate.id)
        seen = model_input(last.situation.input, rng)
        system = system_message(self.system_prompt, seen)
        messages: list[Message] = [
            self._mark(as_parts(system) if self.reasoning else system, False)
        ]
        for index, ((instruction, answer), step) in enumerate(
            zip(turns(steps, known), steps, strict=True)
        ):
            target = is_target(step.candidate) and (not last_only or index == len(steps) - 1)
            if self.reasoning:
                instruction = as_parts(instruction)
                answer = as_parts(answer, reasoning_of(step.candidate))
            messages.extend((self._mark(instruction, False), self._mark(answer, target)))
        row: dict[str, Any] = {
            "messages": messages,
            "tools": [function_tool(tool) for tool in seen.tools],
            **lineage(config, last.situation.id, last.candidate),
            "score": round(candidate_score(last.candidate), SCORE_DIGITS),
            "coached": any(step.candidate.origin == "coaching" for step in steps),
        }
        return Row(CHANNEL, row)
