"""`chat`: OpenAI-style conversations of the selected examples, into `chat.jsonl`.

`ChatExporter` writes whole-run rows, per-turn rows or TRL's prompt/completion rows,
marked for tinker-cookbook (`trainable`) or Axolotl (`weight`). Rows, options and
trainer settings: docs/export.md (`chat`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from pydantic import JsonValue
from pydantic_core import to_json

from gencoach.errors import ExportError
from gencoach.export.dedupe import Seen, pair_form, pair_key
from gencoach.export.formats.base import SCORE_DIGITS, Exporter, Row, RowFailure, lineage
from gencoach.export.formats.conversation import (
    Message,
    Turn,
    as_parts,
    default_system_prompt,
    function_tool,
    opening_key,
    reasoning_of,
    system_message,
    turns,
)
from gencoach.export.history import Step, is_target, trajectory
from gencoach.export.inputs import JsonObject, Shuffle, model_input
from gencoach.export.selection import Example, SelectionPolicy, candidate_score
from gencoach.export.target import Target
from gencoach.export.tool_failures import ToolFailures
from gencoach.export.writer import encode_row
from gencoach.graph import SavedGraph
from gencoach.protocol import CandidateRecord, RunConfig, SituationRecord

CHANNEL = "chat"
FLAVOURS: Final = ("tinker", "axolotl")
"""tinker: `trainable` true/false on every message; axolotl: `weight` 1/0 instead."""
SHAPES: Final = ("messages", "prompt_completion")


def _choice(value: str, known: Sequence[str], key: str) -> str:
    if value not in known:
        names = ", ".join(repr(name) for name in known)
        raise ExportError(f"option {key!r} of format 'chat' must be one of {names}, got {value!r}")
    return value


def uniform_parts(line: bytes) -> bytes:
    """The encoded row with every message's content as parts (for a file where some row
    has them). A row whose every content is already parts holds no `"content":"`, which
    no JSON string can hold unescaped, so it is passed on without decoding."""
    if b'"content":"' not in line:
        return line
    row = json.loads(line)
    for key in ("messages", "prompt", "completion"):
        messages = row.get(key)
        if isinstance(messages, list):
            row[key] = [
                as_parts(message) if isinstance(message.get("content"), str) else message
                for message in messages
            ]
    return encode_row(row)


Key = tuple[int, int, int]
"""A message's key in a save: its candidate, 0 before the answer (with its place) or 1
the answer (with whether it has parts)."""


@dataclass
class _Body:
    """A conversation after its system message: messages, their keys, the targets'
    indices, and whether some answer has a thinking part."""

    messages: list[Message]
    keys: list[Key]
    targets: set[int]
    thinking: bool


class ChatExporter(Exporter):
    """Selected examples as chat conversations with tool calls.

    Every message carries a training mark: true on the assistant messages to learn, false
    elsewhere and on an answer that is not a target (`is_target`: its tool calls all
    failed, a diagnosis blamed it, or the simulator made it). A row always ends on a
    target. Whole-run rows run from the root situation to the selected answer.
    """

    name = "chat"
    files: ClassVar[Mapping[str, str]] = {CHANNEL: "chat.jsonl"}

    def __init__(self, options: Mapping[str, JsonValue]) -> None:
        super().__init__(options)
        self.per_turn = self._reader.flag("per_turn", False)
        self.shape = _choice(self._reader.text("shape", "messages"), SHAPES, "shape")
        self.reasoning = self._reader.flag("reasoning", True)
        # None: each run's default (a single-agent run's speaks of no robots).
        self.system_prompt = self._reader.optional_text("system_prompt")
        self.flavour = _choice(self._reader.text("flavour", "tinker"), FLAVOURS, "flavour")
        self._seen = Seen() if self._reader.flag("dedupe", True) else None
        if self._seen is not None:
            self.counts.update(duplicate_rows=0, duplicate_turns=0)
        self._policy = SelectionPolicy(
            min_score=self._reader.number("min_score", 0),
            best_of=self._reader.count("best_of", 1),
        )
        self.exclude_fallbacks = self._reader.flag("exclude_fallbacks", False)
        declared = self._reader.raw("tool_failures")
        if declared is not None:
            self.tool_failures = ToolFailures.parse(declared, "option 'tool_failures'")
        target = self._reader.raw("as")
        self.target = None if target is None else Target.parse(target)
        self._reader.finish()
        self._one_target = self.per_turn or self.shape == "prompt_completion"
        if not self._one_target:
            self.counts["split_rows"] = 0
        self._parts = {"with": 0, "without": 0}
        self._targets_of: SavedGraph | None = None
        self._targets: dict[int, bool] = {}
        self._forms_of_graph: SavedGraph | None = None
        self._forms: dict[tuple[object, ...], bytes] = {}
        """Pair forms of this save's messages, by their `Key` and by ("head", situation)."""
        self._tool_functions: dict[bytes, Message] = {}

    @property
    def selection(self) -> SelectionPolicy:
        """Selected examples, limited by `min_score` and `best_of`."""
        return self._policy

    def _use(self, graph: SavedGraph) -> None:
        """Start the caches of a save's messages over when the save changes."""
        if self._forms_of_graph is not graph:
            self._forms_of_graph = graph
            self._forms.clear()
            self._tool_functions.clear()

    def _target(self, graph: SavedGraph, candidate: CandidateRecord) -> bool:
        """`is_target`, worked out once per answer of a save."""
        if self._targets_of is not graph:
            self._targets_of, self._targets = graph, {}
        known = self._targets.get(candidate.id)
        if known is None:
            known = self._targets[candidate.id] = is_target(candidate, self.tool_failures)
        return known

    def keeps(self, graph: SavedGraph, example: Example) -> bool:
        """Whole-run rows end on the example's answer: it must be a target."""
        candidate = graph.candidates[example.candidate_id]
        if not self._one_target:
            return self._target(graph, candidate)
        steps = trajectory(graph, example.candidate_id)
        return any(self._target(graph, step.candidate) for step in steps)

    def rewrite(self) -> Callable[[bytes], bytes] | None:
        """Content parts everywhere when only some rows have them."""
        return uniform_parts if self._parts["with"] and self._parts["without"] else None

    def rows(
        self, graph: SavedGraph, examples: Sequence[Example], shuffle: Shuffle
    ) -> Iterator[Row | RowFailure]:
        """A conversation per example, or per target turn with `per_turn`."""
        written: set[int] = set()
        known: dict[int, Turn] = {}
        self._use(graph)
        for example in examples:
            steps = trajectory(graph, example.candidate_id)
            if not self._one_target:
                if self._target(graph, steps[-1].candidate):
                    yield from self._whole_run(graph, steps, known, shuffle)
                continue
            for end, step in enumerate(steps):
                if step.candidate.id in written:
                    continue
                if self._target(graph, step.candidate):
                    written.add(step.candidate.id)
                    row = self._row(graph, steps[: end + 1], known, shuffle, {end})
                    if row is not None:
                        yield row

    def _whole_run(
        self, graph: SavedGraph, steps: Sequence[Step], known: dict[int, Turn], shuffle: Shuffle
    ) -> Iterator[Row | RowFailure]:
        """The whole-run rows of an example: a row has one system message and one tool
        list, so it trains only the targets whose situation opened as its last did (same
        attributes, rules and tools); the others are trained in rows of their own, each
        ending at the last target that opened alike, earlier ones first."""
        prompt = self._prompt(graph.config)
        alike: dict[bytes, list[int]] = {}
        for index, step in enumerate(steps):
            if self._target(graph, step.candidate):
                alike.setdefault(self._head(prompt, step.situation), []).append(index)
        if len(alike) > 1:
            self.counts["split_rows"] += 1
        for indices in sorted(alike.values(), key=lambda group: group[-1]):
            row = self._row(graph, steps[: indices[-1] + 1], known, shuffle, set(indices))
            if row is not None:
                yield row

    def _mark(self, message: Message, trainable: bool) -> Message:
        """A copy of the message with the flavour's training mark."""
        if self.flavour == "axolotl":
            return {**message, "weight": 1 if trainable else 0}
        return {**message, "trainable": trainable}

    def _functions(self, tools: Sequence[JsonObject], robots: bool) -> list[Message]:
        """The tools as function tools, each distinct tool converted once per save (its
        situations usually offer the same tools, each in objects of its own)."""
        converted = []
        for tool in tools:
            key = to_json(tool)
            function = self._tool_functions.get(key)
            if function is None:
                function = self._tool_functions[key] = function_tool(tool, robots=robots)
            converted.append(function)
        return converted

    def _head(self, prompt: str, situation: SituationRecord) -> bytes:
        """The pair form of what a situation's system message and tools show (keyed on
        the input as given, unshuffled: the shuffles vary the order, not the decision),
        encoded once per save."""
        head = self._forms.get(("head", situation.id))
        if head is None:
            head = self._forms[("head", situation.id)] = pair_form(
                opening_key(prompt, situation.input)
            )
        return head

    def _forms_of(
        self, prompt: str, last: SituationRecord, body: list[Message], keys: list[Key]
    ) -> tuple[bytes, list[bytes]]:
        """The pair forms of a conversation: its head (the context's opening, see
        `_head`) and each message after the system one. Each is encoded once per save, by
        its key."""
        head = self._head(prompt, last)
        forms: list[bytes] = []
        for message, key in zip(body, keys, strict=True):
            form = self._forms.get(key)
            if form is None:
                form = self._forms[key] = pair_form(message)
            forms.append(form)
        return head, forms

    def decision_key(self, graph: SavedGraph, example: Example) -> bytes | None:
        """With `dedupe`, the (context, answer) pair of the example's answer: identical
        answers in identical contexts take one place in `best_of`."""
        if self._seen is None:
            return None
        self._use(graph)
        steps = trajectory(graph, example.candidate_id)
        prompt = self._prompt(graph.config)
        body = self._body(graph, steps, {}, {len(steps) - 1})
        if isinstance(body, RowFailure):
            return None
        head, forms = self._forms_of(prompt, steps[-1].situation, body.messages, body.keys)
        return pair_key(head, forms)

    def _thinking(self, step: Step) -> str:
        text = reasoning_of(step.candidate)
        return text if self.target is None else self.target.reasoning(text)

    def _prompt(self, config: RunConfig) -> str:
        """The opening of the system message: the target's instructions, the option, or
        the run's default."""
        if self.target is not None and self.target.instructions is not None:
            return self.target.instructions
        if self.system_prompt is not None:
            return self.system_prompt
        return default_system_prompt(config.single_agent)

    def _body(
        self,
        graph: SavedGraph,
        steps: Sequence[Step],
        known: dict[int, Turn],
        trained: Container[int],
    ) -> _Body | RowFailure:
        """The conversation after the system message, its messages' keys, its targets:
        the answers of the steps at `trained` that are targets."""
        body = _Body([], [], set(), False)
        pairs = turns(steps, known, robots=not graph.config.single_agent)
        for index, ((opening, answer), step) in enumerate(zip(pairs, steps, strict=True)):
            final = index == len(steps) - 1
            body.messages.extend(opening)
            body.keys.extend((step.candidate.id, 0, place) for place in range(len(opening)))
            if index in trained and self._target(graph, step.candidate):
                body.targets.add(len(body.messages))
            if self.reasoning and (final or not self._one_target):
                try:
                    text = self._thinking(step)
                except ExportError as error:
                    last = steps[-1]
                    return RowFailure(f"{last.situation.id}:{last.candidate.id}", error.reason)
                if text:
                    answer = as_parts(answer, text)
                    body.thinking = True
            body.messages.append(answer)
            body.keys.append((step.candidate.id, 1, isinstance(answer["content"], list)))
        return body

    def _row(
        self,
        graph: SavedGraph,
        steps: Sequence[Step],
        known: dict[int, Turn],
        shuffle: Shuffle,
        trained: Container[int],
    ) -> Row | RowFailure | None:
        """The row ending at the last step, its targets among the steps at `trained`."""
        last = steps[-1]
        config = graph.config
        rng = shuffle.rng(config.run_id, last.situation.id, last.candidate.id)
        seen = model_input(last.situation.input, rng)
        robots = not config.single_agent
        prompt = self._prompt(config)
        body = self._body(graph, steps, known, trained)
        if isinstance(body, RowFailure):
            return body
        thinking = body.thinking
        targets = body.targets
        messages = body.messages
        if self._seen is not None:
            head, forms = self._forms_of(prompt, last.situation, messages, body.keys)
            kept = self._seen.first(head, forms, targets)
            if not kept:
                self.counts["duplicate_rows"] += 1
                self.counts["duplicate_turns"] = self._seen.duplicates
                return None
            targets = kept
            messages = messages[: max(kept) + 1]  # a row ends on a target, repeats cut off
            self.counts["duplicate_turns"] = self._seen.duplicates
        messages = [system_message(prompt, seen), *messages]
        targets = {index + 1 for index in targets}
        offered = seen.tools
        if self.target is not None and self.target.tools is not None:
            offered = list(self.target.tools)
            calls = [call["function"]["name"] for m in messages for call in m.get("tool_calls", [])]
            unknown = self.target.unknown_calls(calls)
            if unknown:
                reason = f"the row calls {', '.join(unknown)}, which option 'as' does not offer"
                return RowFailure(f"{last.situation.id}:{last.candidate.id}", reason)
        tools = self._functions(offered, robots)
        if thinking:
            messages = [as_parts(m) if isinstance(m["content"], str) else m for m in messages]
        self._parts["with" if thinking else "without"] += 1
        row: dict[str, Any] = {}
        if self.shape == "prompt_completion":
            row["prompt"], row["completion"] = messages[:-1], messages[-1:]
        else:
            row["messages"] = [self._mark(m, i in targets) for i, m in enumerate(messages)]
        row["tools"] = tools
        row.update(lineage(config, last.situation.id, last.candidate))
        row["score"] = round(candidate_score(last.candidate), SCORE_DIGITS)
        row["coached"] = any(step.candidate.origin == "coaching" for step in steps)
        row["whole_run"] = not self._one_target
        if self.target is not None:
            self.target.relabel(row)
        return Row(CHANNEL, row)
