"""What an export format is: a named plugin that turns one save into dataset rows.

A format is found through the entry-point group `gencoach.exporters`; the entry point
names a factory called with the options object (a class is a factory). The export
drives it: it hands each save and its selected examples to `rows`, writes the rows it
yields to the file of their channel, and records each `RowFailure`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import JsonValue

from gencoach.__about__ import __version__
from gencoach.export.inputs import Shuffle
from gencoach.export.options import Options
from gencoach.export.selection import Example, SelectionPolicy
from gencoach.export.tool_failures import NO_PREDICATES, ToolFailures
from gencoach.graph import SavedGraph
from gencoach.library.sources.canonical import save_environment, task_key
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
    """Base of every format; subclasses read the options they implement in `__init__`,
    then `finish`, which refuses every other one."""

    name: ClassVar[str]
    version: ClassVar[str] = __version__
    files: ClassVar[Mapping[str, str]]
    """Channel → file name; `.jsonl` files hold a row per line, `.json` files one array."""
    exclude_fallbacks: bool = False
    """Leave out examples at or below fallback-made corrections: set by a format that
    implements the option `exclude_fallbacks` (the export's selection honours it; a format
    without a selection honours it itself). A format that does not read the option refuses
    it as unknown, as every option it does not implement."""

    tool_failures: ToolFailures = NO_PREDICATES
    """The tools' own failure predicates (options, or the integration through the export)."""

    def __init__(self, options: Mapping[str, JsonValue]) -> None:
        self.options = dict(options)
        self._reader = Options(options, self.name)
        self.counts: dict[str, int] = {}
        """What the format counted (e.g. duplicates left out), recorded in the manifest."""

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

    def keeps(self, graph: SavedGraph, example: Example) -> bool:
        """Whether the example would give a row: only those are ranked by `best_of`."""
        return True

    def decision_key(self, graph: SavedGraph, example: Example) -> bytes | None:
        """The identity of the (context, target) pair the example's row trains, for a
        format that trains each pair once: `best_of` gives examples with one key one
        place, so duplicates are removed before ranking (None: the example is distinct)."""
        return None

    def rewrite(self) -> Callable[[bytes], bytes] | None:
        """A change to every written line (an encoded row), decided once all rows are
        made (None: none)."""
        return None

    @abstractmethod
    def rows(
        self, graph: SavedGraph, examples: Sequence[Example], shuffle: Shuffle
    ) -> Iterator[Row | RowFailure]:
        """The rows of one save, in a deterministic order."""


_last_task: list[tuple[RunConfig, str]] = []


def _task_key(config: RunConfig) -> str:
    """The config's `task_key`, worked out once for the rows of a save in a row."""
    if _last_task and _last_task[0][0] is config:
        return _last_task[0][1]
    key = task_key(config.scenario, config.target, config.task_description)
    _last_task[:] = [(config, key)]
    return key


def lineage(config: RunConfig, situation_id: int, candidate: CandidateRecord) -> dict[str, Any]:
    """Where a row's answer comes from: run, task, situation, candidate, attempts, origin,
    and the agent (id and version) that produced the save.

    `task_key` is the trajectory library's key of the task, so a library that reads the
    row puts it in the same split as the save it came from; `generator` (name, version)
    and `scenario_version` are the save's, so it has the same benchmark and environment
    key there too."""
    environment = save_environment(config)
    return {
        "run_id": config.run_id,
        "scenario": config.scenario,
        "scenario_version": environment["scenario_version"],
        "generator": {
            "name": environment["generator"],
            "version": environment["generator_version"],
        },
        "target": config.target,
        "task_key": _task_key(config),
        "situation_id": situation_id,
        "candidate_id": candidate.id,
        "attempt_ids": list(candidate.coaching_attempt_ids),
        "origin": candidate.origin,
        "agent_id": config.agent_id,
        "agent_version": config.agent_version,
        "decision_source": candidate.decision_source,
    }


def example_id(situation_id: int, candidate_id: int) -> str:
    """How failures name an example: `<situation>:<candidate>`."""
    return f"{situation_id}:{candidate_id}"
