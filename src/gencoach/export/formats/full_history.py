"""`full-history`: MAGMA's full-history agent rows, into `hr_data.json`.

`FullHistoryExporter` writes one row per selected example: what the agent was given (the
structured parts as JSON strings) and its answer as a MAGMA action (`magma_action`).
Rows and options: docs/export.md (`full-history`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

from pydantic import JsonValue

from gencoach.export.dedupe import Seen, pair_form, pair_key
from gencoach.export.formats.base import (
    SCORE_DIGITS,
    Exporter,
    Row,
    RowFailure,
    example_id,
    lineage,
)
from gencoach.export.history import Step, trajectory
from gencoach.export.inputs import UNSHUFFLED, Shuffle, model_input
from gencoach.export.selection import Example, SelectionPolicy
from gencoach.graph import SavedGraph
from gencoach.protocol import AgentDecision, AgentInput, AgentInstruction

CHANNEL = "hr_data"


class OneCallPerRobotError(ValueError):
    """A decision sends two calls to one robot, which a MAGMA action cannot hold."""


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def magma_action(decision: AgentDecision, strict: bool = True) -> dict[str, Any]:
    """`{robot: {name, arguments}}`; leniently, a robot with several calls gets a list."""
    action: dict[str, Any] = {}
    for call in decision.tool_calls:
        entry = {"name": call.name, "arguments": call.arguments}
        robot = call.target_robot_name
        if robot not in action:
            action[robot] = entry
        elif strict:
            raise OneCallPerRobotError(
                f"a full-history row holds one call per robot; the answer sends "
                f"several calls to {robot!r}"
            )
        else:
            previous = action[robot]
            action[robot] = [*(previous if isinstance(previous, list) else [previous]), entry]
    return action


def model_content(decision: AgentDecision | None) -> str:
    """An answer as a MAGMA history entry: the words, the action as JSON, or both."""
    if decision is None:
        return ""
    action = magma_action(decision, strict=False)
    if not action:
        return decision.say
    if not decision.say:
        return _dumps(action)
    return f"{decision.say}\n{_dumps(action)}"


def rebuilt_history(steps: Sequence[Step]) -> list[JsonValue]:
    """The history of earlier steps, when the agent kept none in its memory
    (`memory.history`): one `{author, content}` entry per instruction (`USER`/`ENV`) and
    per answer (`MODEL`, as MAGMA writes it: see `model_content`)."""
    entries: list[JsonValue] = []
    for step in steps:
        instruction = step.situation.input.instruction
        entries.append({"author": instruction.type.upper(), "content": instruction.content})
        entries.append({"author": "MODEL", "content": model_content(step.candidate.output)})
    return entries


class FullHistoryExporter(Exporter):
    """Selected examples as MAGMA full-history rows.

    With `dedupe` (the default), a row whose context (what the agent was given,
    unshuffled, with its history and instruction) and output an earlier row of the
    dataset already holds is left out, counted in `duplicate_rows`: the copies of a
    situation that coaching made share one input, and repeated runs of a task often
    answer alike.
    """

    name = "full-history"
    files: ClassVar[Mapping[str, str]] = {CHANNEL: "hr_data.json"}

    def __init__(self, options: Mapping[str, JsonValue]) -> None:
        super().__init__(options)
        self._policy = SelectionPolicy(
            min_score=self._reader.number("min_score", 0),
            best_of=self._reader.count("best_of", 1),
        )
        self.exclude_fallbacks = self._reader.flag("exclude_fallbacks", False)
        self._seen = Seen() if self._reader.flag("dedupe", True) else None
        if self._seen is not None:
            self.counts["duplicate_rows"] = 0
        self._reader.finish()

    @property
    def selection(self) -> SelectionPolicy:
        """Selected examples, limited by `min_score` and `best_of`."""
        return self._policy

    def rows(
        self, graph: SavedGraph, examples: Sequence[Example], shuffle: Shuffle
    ) -> Iterator[Row | RowFailure]:
        """One row per selected example."""
        config = graph.config
        for example in examples:
            candidate = graph.candidates[example.candidate_id]
            situation = graph.situations[example.situation_id]
            if candidate.output is None:  # selection keeps completed answers only
                continue
            try:
                action = magma_action(candidate.output)
            except OneCallPerRobotError as error:
                yield RowFailure(example_id(situation.id, candidate.id), str(error))
                continue
            # Drawn for every example, so a stream of shuffles does not depend on dedupe.
            rng = shuffle.rng(config.run_id, situation.id, candidate.id)
            seen = model_input(situation.input, rng)
            history = seen.history
            if history is None:
                history = rebuilt_history(trajectory(graph, candidate.id)[:-1])
            instruction = situation.input.instruction
            output = _dumps({"say": candidate.output.say, "action": action})
            if not self._new(situation.input, history, instruction, output):
                continue
            metadata = lineage(config, situation.id, candidate)
            metadata["score"] = round(example.score, SCORE_DIGITS)
            yield Row(
                CHANNEL,
                {
                    "persistent_rules": _dumps(seen.rules),
                    "attributes": _dumps(seen.attributes),
                    "tools": _dumps(seen.tools),
                    "history": _dumps(history),
                    "memory": _dumps(seen.memory),
                    "instruction": instruction.content,
                    "instruction_role": instruction.type.upper(),
                    "output": output,
                    "metadata": metadata,
                },
            )

    def decision_key(self, graph: SavedGraph, example: Example) -> bytes | None:
        """With `dedupe`, the example's (context, output) pair: identical answers to
        identical inputs take one place in `best_of`."""
        candidate = graph.candidates[example.candidate_id]
        if self._seen is None or candidate.output is None:
            return None
        situation = graph.situations[example.situation_id]
        try:
            output = _dumps({"say": candidate.output.say, "action": magma_action(candidate.output)})
        except OneCallPerRobotError:
            return None
        history = model_input(situation.input, UNSHUFFLED).history
        if history is None:
            history = rebuilt_history(trajectory(graph, candidate.id)[:-1])
        head = self._context(situation.input, history, situation.input.instruction)
        return pair_key(head, [output.encode()])

    @staticmethod
    def _context(
        source: AgentInput, history: list[JsonValue], instruction: AgentInstruction
    ) -> bytes:
        """A row's context as pairs compare it, keyed on the input as given: the shuffles
        vary its order only."""
        given = model_input(source, UNSHUFFLED)
        context = [given.rules, given.attributes, given.tools, given.memory, history]
        context += [instruction.content, instruction.type]
        return pair_form(context)

    def _new(
        self,
        source: AgentInput,
        history: list[JsonValue],
        instruction: AgentInstruction,
        output: str,
    ) -> bool:
        """Whether the (context, output) pair is new to the dataset (always, without dedupe)."""
        if self._seen is None:
            return True
        if self._seen.first(self._context(source, history, instruction), [output.encode()], {0}):
            return True
        self.counts["duplicate_rows"] = self._seen.duplicates
        return False
