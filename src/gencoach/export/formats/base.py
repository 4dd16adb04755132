"""What an export format is: a named plugin that turns one save into dataset rows.

A format is found through the entry-point group `gencoach.exporters`; the entry point
names a factory called with the options object (a class is a factory). The export
drives it: it hands each save and its selected examples to `rows`, writes the rows it
yields to the file of their channel, and records each `RowFailure`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import JsonValue

from gencoach.__about__ import __version__
from gencoach.export.inputs import Shuffle
from gencoach.export.options import Options
from gencoach.export.selection import Example, SelectionPolicy
from gencoach.graph import SavedGraph
from gencoach.protocol import CandidateRecord, RunConfig

JsonObject = dict[str, JsonValue]
SCORE_DIGITS = 6
"""Scores in row metadata are rounded to this many decimals (sums of floats carry noise)."""


@dataclass(frozen=True)
class Row:
    """One dataset row and the channel (output file) it belongs to."""

    channel: str
    data: dict[str, Any]


@dataclass(frozen=True)
class RowFailure:
    """An example that could not become a row, and why."""

    example: str
    reason: str


class Exporter(ABC):
    """Base of every format; subclasses read their options in `__init__`, then `finish`."""

    name: ClassVar[str]
    version: ClassVar[str] = __version__
    files: ClassVar[Mapping[str, str]]
    """Channel → file name; `.jsonl` files hold a row per line, `.json` files one array."""

    def __init__(self, options: Mapping[str, JsonValue]) -> None:
        self.options = dict(options)
        self._reader = Options(options, self.name)
        self.accepted_agents = self._reader.agents("agents")

    @property
    def label(self) -> str:
        """The name the manifest and the destination folder give this format."""
        return self.name

    @property
    def release(self) -> str:
        """The format's version, recorded in the manifest."""
        return self.version

    @property
    def channels(self) -> Mapping[str, str]:
        """Channel → file name of this format."""
        return self.files

    @property
    def selection(self) -> SelectionPolicy | None:
        """The limits on selected examples, or None for a format that selects on its own."""
        return SelectionPolicy()

    def accepts(self, config: RunConfig) -> str | None:
        """None when this format exports the save's producer, else the reason it does not."""
        if self.accepted_agents is None:
            return None
        for agent_id, version in self.accepted_agents:
            if config.agent_id == agent_id and version in (None, config.agent_version):
                return None
        accepted = ", ".join(
            f"{agent_id} {version}" if version else f"{agent_id} (any version)"
            for agent_id, version in self.accepted_agents
        )
        return (
            f"produced by agent {config.agent_id} {config.agent_version}, which format "
            f"{self.name!r} does not accept (accepted: {accepted})"
        )

    @abstractmethod
    def rows(
        self, graph: SavedGraph, examples: Sequence[Example], shuffle: Shuffle
    ) -> Iterator[Row | RowFailure]:
        """The rows of one save, in a deterministic order."""


def lineage(config: RunConfig, situation_id: int, candidate: CandidateRecord) -> dict[str, Any]:
    """Where a row's answer comes from: run, task, situation, candidate, attempts, origin."""
    return {
        "run_id": config.run_id,
        "scenario": config.scenario,
        "target": config.target,
        "situation_id": situation_id,
        "candidate_id": candidate.id,
        "attempt_ids": list(candidate.coaching_attempt_ids),
        "origin": candidate.origin,
    }


def example_id(situation_id: int, candidate_id: int) -> str:
    """How failures name an example: `<situation>:<candidate>`."""
    return f"{situation_id}:{candidate_id}"
