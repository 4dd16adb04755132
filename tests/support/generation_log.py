"""Reading what a generation reported: its JSONL log, as a tree of nodes."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Json = dict[str, Any]


def read_log(path: Path) -> list[Json]:
    """The events of a generation log, in order."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@dataclass
class Tree:
    """A run's nodes by generator id: situations, candidates and their executions."""

    events: list[Json]
    situations: dict[str, Json] = field(default_factory=dict)
    candidates: dict[str, Json] = field(default_factory=dict)
    executed: dict[str, Json] = field(default_factory=dict)

    @classmethod
    def of(cls, events: list[Json]) -> Tree:
        """Index a list of events."""
        tree = cls(events)
        for event in events:
            if event["type"] == "situation.created":
                tree.situations[event["situation_id"]] = event
            elif event["type"] == "candidate.created":
                tree.candidates[event["candidate_id"]] = event
            elif event["type"] == "candidate.executed":
                tree.executed[event["candidate_id"]] = event
        return tree

    def members(self, situation_id: str) -> list[str]:
        """The candidates of a situation, in report order."""
        return [c for c, event in self.candidates.items() if event["situation_id"] == situation_id]

    def statuses(self, situation_id: str) -> list[str]:
        """The executed statuses of a situation's candidates, in report order."""
        return [self.executed[c]["status"] for c in self.members(situation_id)]

    def children(self, candidate_id: str) -> list[str]:
        """The situations that follow a candidate."""
        return [
            s
            for s, event in self.situations.items()
            if event["parent_candidate_id"] == candidate_id
        ]

    def stage_ends(self) -> list[tuple[str, str]]:
        """Every stage end reported, as (event, state)."""
        return [
            (e["stage_end"]["event"], e["stage_end"]["state"])
            for e in self.executed.values()
            if e.get("stage_end")
        ]
