"""`preference`: pairs of answers to one saved situation, into `preference.jsonl`.

`situation_copies` groups the copies of a situation; across them `PreferenceExporter`
sets each `proven` answer (chosen) against each answer with a `rejection`. Rows and
options: docs/export.md (`preference`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

from pydantic import JsonValue

from gencoach.export.formats.base import SCORE_DIGITS, Exporter, Row, RowFailure
from gencoach.export.formats.conversation import (
    Message,
    Turn,
    assistant_message,
    default_system_prompt,
    function_tool,
    system_message,
    turns,
)
from gencoach.export.history import trajectory
from gencoach.export.inputs import Shuffle, model_input
from gencoach.export.selection import (
    Example,
    SelectionPolicy,
    after_fallback,
    candidate_score,
    eligible,
)
from gencoach.graph import SavedGraph
from gencoach.protocol import CandidateRecord, SituationRecord

CHANNEL = "preference"
FAULTY = "diagnosed_faulty"
FAILED = "failed"


def _input_key(situation: SituationRecord) -> tuple[int | None, str]:
    # The input id and extra keys (where coaching travels) differ between copies.
    shown = situation.input.model_dump(
        mode="json", include={"instruction", "tools", "attributes", "memory"}
    )
    return situation.parent_id, json.dumps(shown, sort_keys=True)


def situation_copies(graph: SavedGraph) -> list[list[SituationRecord]]:
    """Situations grouped by parent answer and input, in order of their first id.

    A saved situation may exist several times: the original, and the coached
    alternatives that re-asked it (same parent answer, same input).
    """
    groups: dict[tuple[int | None, str], list[SituationRecord]] = {}
    for situation_id in sorted(graph.situations):
        situation = graph.situations[situation_id]
        groups.setdefault(_input_key(situation), []).append(situation)
    return list(groups.values())


def proven(candidate: CandidateRecord, coached_only: bool = True) -> bool:
    """An eligible answer carrying a coaching attempt id (any eligible answer, with
    `coached_only` false) whose descendant score, in its own stage, counts an optimal or
    non-optimal success."""
    stage = candidate.score.get(f"stage_{candidate.stage_id}")
    return (
        eligible(candidate)
        and (bool(candidate.coaching_attempt_ids) or not coached_only)
        and stage is not None
        and stage.optimal + stage.non_optimal > 0
    )


def rejection(candidate: CandidateRecord) -> str | None:
    """Why an answer is a rejected one, or None: diagnosed faulty (the answer a coaching
    replaced), or failed (every trajectory of it in its stage failed)."""
    if candidate.kind != "agent" or candidate.output is None:
        return None
    if candidate.coaching.diagnosed_as_faulty:
        return FAULTY
    stage = candidate.score.get(f"stage_{candidate.stage_id}")
    succeeded = stage is not None and stage.optimal + stage.non_optimal + stage.unassessed > 0
    if candidate.execution_finished and stage is not None and stage.total_child > 0:
        return None if succeeded else FAILED
    return None


def _side(situation_id: int, candidate: CandidateRecord) -> dict[str, Any]:
    return {
        "situation_id": situation_id,
        "candidate_id": candidate.id,
        "attempt_ids": list(candidate.coaching_attempt_ids),
        "origin": candidate.origin,
        "decision_source": candidate.decision_source,
        "status": candidate.status,
        "score": round(candidate_score(candidate), SCORE_DIGITS),
    }


class PreferenceExporter(Exporter):
    """Proven answers against the answers they replaced or outlived."""

    name = "preference"
    files: ClassVar[Mapping[str, str]] = {CHANNEL: "preference.jsonl"}

    def __init__(self, options: Mapping[str, JsonValue]) -> None:
        super().__init__(options)
        # False: uncoached runs yield pairs of successful and failed siblings too.
        self.coached_only = self._reader.flag("coached_only", True)
        self.exclude_fallbacks = self._reader.flag("exclude_fallbacks", False)
        # None: each run's default (a single-agent run's speaks of no robots).
        self.system_prompt = self._reader.optional_text("system_prompt")
        self._reader.finish()

    @property
    def selection(self) -> SelectionPolicy | None:
        """Pairs come from the situations themselves, not from selected examples."""
        return None

    def rows(
        self, graph: SavedGraph, examples: Sequence[Example], shuffle: Shuffle
    ) -> Iterator[Row | RowFailure]:
        """One row per (chosen, rejected) pair of each situation's copies."""
        known: dict[int, Turn] = {}
        for copies in situation_copies(graph):
            answers = sorted(
                (
                    (candidate, situation.id)
                    for situation in copies
                    for candidate in situation.candidates
                ),
                key=lambda pair: pair[0].id,
            )
            if self.exclude_fallbacks:
                answers = [(c, sid) for c, sid in answers if not after_fallback(graph, c)]
            chosen = [(c, sid) for c, sid in answers if proven(c, self.coached_only)]
            rejected = [(c, sid, why) for c, sid in answers if (why := rejection(c))]
            for good, good_situation in chosen:
                for bad, bad_situation, why in rejected:
                    pair = ((good, good_situation), (bad, bad_situation, why))
                    yield self._row(graph, *pair, known, shuffle)

    def _row(
        self,
        graph: SavedGraph,
        good: tuple[CandidateRecord, int],
        bad: tuple[CandidateRecord, int, str],
        known: dict[int, Turn],
        shuffle: Shuffle,
    ) -> Row:
        config = graph.config
        chosen, chosen_situation = good
        rejected, rejected_situation, why = bad
        steps = trajectory(graph, chosen.id)
        rng = shuffle.rng(config.run_id, chosen.id, rejected.id)
        seen = model_input(steps[-1].situation.input, rng)
        robots = not config.single_agent
        text = self.system_prompt
        if text is None:
            text = default_system_prompt(config.single_agent)
        prompt: list[Message] = [system_message(text, seen)]
        conversation = turns(steps, known, robots=robots)
        for opening, answer in conversation[:-1]:
            prompt.extend((*opening, answer))
        prompt.extend(conversation[-1][0])
        return Row(
            CHANNEL,
            {
                "prompt": prompt,
                "chosen": [conversation[-1][1]],
                "rejected": [assistant_message(rejected, robots=robots)],
                "tools": [function_tool(tool, robots=robots) for tool in seen.tools],
                "metadata": {
                    "run_id": config.run_id,
                    "scenario": config.scenario,
                    "target": config.target,
                    "agent_id": config.agent_id,
                    "agent_version": config.agent_version,
                    "chosen": _side(chosen_situation, chosen),
                    "rejected": {**_side(rejected_situation, rejected), "reason": why},
                },
            },
        )
