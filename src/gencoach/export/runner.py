"""One export: find the saves, select, render through the format, split, write."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Final

from pydantic import JsonValue

from gencoach.errors import ExportError, SaveError
from gencoach.export.destination import DATASETS_DIR, claim, default_destination
from gencoach.export.discovery import load_exporter
from gencoach.export.formats.base import Exporter, RowFailure
from gencoach.export.inputs import Shuffle
from gencoach.export.magma import MagmaExporter
from gencoach.export.manifest import (
    FAILURES_FILE,
    MANIFEST_FILE,
    completed_export,
    producer,
    signature,
)
from gencoach.export.selection import Example, SelectionPolicy, select
from gencoach.export.sources import Discovery, Save, Skipped, discover, one_line
from gencoach.export.splits import (
    Folder,
    Partition,
    SplitKey,
    Task,
    check_folder_ratio,
    partition,
    partition_folders,
)
from gencoach.export.writer import DatasetWriter
from gencoach.graph import CONFIG_FILE, SavedGraph, read_save

Report = Callable[[str], None]
Track = Callable[[Iterable[Save], int], Iterable[Save]]
SPLITS: Final = ("task", "folder")


@dataclass(frozen=True)
class ExportSettings:
    """What to export (a format, or a MAGMA agent's exporter), where, how, with which seeds."""

    source: Path
    format: str = ""
    options: dict[str, JsonValue] = field(default_factory=dict)
    validation_ratio: float = 0.05
    split_seed: int = 42
    shuffle_seed: int = 42
    skip_pre_made: bool = False
    out: Path | None = None
    agent: str | None = None
    any_agent: bool = False
    split_by: str = "task"

    @property
    def label(self) -> str:
        """The format's name, or `agent-<NAME>` for a MAGMA exporter."""
        return f"agent-{self.agent}" if self.agent is not None else self.format

    @property
    def destination(self) -> Path:
        """`--out`, or `SOURCE/datasets/<label>`."""
        return self.out if self.out is not None else default_destination(self.source, self.label)


@dataclass
class ExportOutcome:
    """What an export did: where, how many rows, what it skipped and what failed."""

    destination: Path
    reused: bool
    rows: dict[str, int]
    saves: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    partition: Partition | None = None

    @property
    def complete(self) -> bool:
        """No failure: every accepted save and example made it."""
        return not self.failures


def _no_track(saves: Iterable[Save], total: int) -> Iterable[Save]:
    return saves


def _quiet(message: str) -> None:
    pass


def run_export(
    settings: ExportSettings, report: Report = _quiet, track: Track = _no_track
) -> ExportOutcome:
    """Export the saves below `settings.source`; raise ExportError when nothing can be."""
    _check(settings)
    exporter = _exporter(settings)
    destination = settings.destination
    claim(destination, exporter.label)
    excluded = (settings.source / DATASETS_DIR, destination)
    found = discover(settings.source, exclude=excluded, accepts=exporter.accepts)
    for skipped in found.skipped:
        report(f"skipped {skipped.reason}")
    failures: list[dict[str, Any]] = []
    for refused in found.refused:
        failures.append({"source": refused.name, "example": None, "error": refused.reason})
        report(f"refused {refused.name}: {refused.reason}")
    accepted = found.saves
    if not accepted:
        raise ExportError(_nothing_usable(settings, found))
    recorded = {
        "format": exporter.label,
        "exporter_version": exporter.release,
        "options": settings.options,
        "validation_ratio": settings.validation_ratio,
        "split_by": settings.split_by,
        "split_seed": settings.split_seed,
        "shuffle_seed": settings.shuffle_seed,
        "producer": producer(),
    }
    expected = signature(found.digests, recorded)
    if settings.skip_pre_made and not failures:
        manifest = completed_export(destination, expected)
        if manifest is not None:
            rows = manifest.get("rows")
            return ExportOutcome(destination, True, dict(rows) if isinstance(rows, dict) else {})
    outcome = ExportOutcome(destination, reused=False, rows={}, skipped=list(found.skipped))
    outcome.failures = failures
    kept = _best_of(exporter, accepted, outcome, report)
    by_folder = settings.split_by == "folder"
    if by_folder:  # MAGMA-GEN's order: the config files' paths, compared part by part
        accepted = sorted(accepted, key=lambda save: PurePosixPath(save.name, CONFIG_FILE).parts)
    shuffle = Shuffle(settings.shuffle_seed, stream=by_folder)
    writer = DatasetWriter(destination, exporter.channels)
    try:
        folders: list[Folder] = []
        for save in track(accepted, len(accepted)):
            graph = _read(save, outcome, report)
            if graph is None:
                continue
            outcome.saves += 1
            key: SplitKey = Folder(save.name) if by_folder else save.task
            folders.append(Folder(save.name))
            _render(exporter, shuffle, save, key, graph, kept, writer, failures)
        if outcome.saves == 0:
            raise ExportError(f"no usable save under {settings.source}: none could be read")
        if by_folder:
            split = partition_folders(folders, settings.validation_ratio, settings.split_seed)
        else:
            split = partition(_tasks(writer), settings.validation_ratio, settings.split_seed)
        _write(writer, outcome, split, {"signature": expected, "settings": recorded})
    except BaseException:
        writer.abort()
        raise
    return outcome


def _check(settings: ExportSettings) -> None:
    if settings.split_by not in SPLITS:
        raise ExportError(f"--split-by must be task or folder, got {settings.split_by!r}")
    if settings.split_by == "folder":
        check_folder_ratio(settings.validation_ratio)
    elif not 0 <= settings.validation_ratio < 1:
        raise ExportError(
            f"the validation ratio must be at least 0 and below 1, got {settings.validation_ratio}"
        )
    if (settings.agent is None) == (not settings.format):
        raise ExportError("give a --format or an --agent to export with (one of them)")
    if settings.any_agent and settings.agent is None:
        raise ExportError("--any-agent applies to --agent exports only")
    if not settings.source.is_dir():
        raise ExportError(f"source {settings.source} is not a folder")


def _exporter(settings: ExportSettings) -> Exporter:
    if settings.agent is not None:
        return MagmaExporter(settings.agent, settings.options, settings.any_agent)
    return load_exporter(settings.format, settings.options)


def _tasks(writer: DatasetWriter) -> list[Task]:
    return [key for key in writer.tasks() if isinstance(key, Task)]


def _write(
    writer: DatasetWriter, outcome: ExportOutcome, split: Partition, identity: dict[str, Any]
) -> None:
    """Stage the split files, the failures and the manifest (last), then move them in."""
    outcome.rows = dict(writer.counts)
    outcome.partition = split
    writer.stage(split)
    writer.stage_document(FAILURES_FILE, outcome.failures)
    files = writer.hashes()
    manifest = {
        "producer": producer(),
        "complete": outcome.complete,
        **identity,
        "rows": outcome.rows,
        "saves": outcome.saves,
        "split": split.to_json(),
        "skipped": [item.to_json() for item in outcome.skipped],
        "files": files,
    }
    writer.stage_document(MANIFEST_FILE, manifest)
    writer.commit()


def _nothing_usable(settings: ExportSettings, found: Discovery) -> str:
    if not found.digests:
        return f"no save under {settings.source}: no config.json found"
    return (
        f"no usable save under {settings.source}: {len(found.digests)} found, "
        f"{len(found.skipped)} skipped (unreadable or incomplete), "
        f"{len(found.refused)} refused by {_described(settings)}"
    )


def _described(settings: ExportSettings) -> str:
    if settings.agent is not None:
        return f"MAGMA exporter {settings.agent!r}"
    return f"format {settings.format!r}"


def _read(save: Save, outcome: ExportOutcome, report: Report) -> SavedGraph | None:
    try:
        return read_save(save.folder)
    except SaveError as error:
        skipped = Skipped(save.name, one_line(str(error)))
        if skipped not in outcome.skipped:
            outcome.skipped.append(skipped)
            report(f"skipped {skipped.reason}")
        return None


def _examples(exporter: Exporter, graph: SavedGraph) -> list[Example]:
    policy = exporter.selection
    return [] if policy is None else select(graph, policy.min_score)


@dataclass(frozen=True)
class _Ranked:
    """An example's rank in its task; the heap keeps the worst kept one on top."""

    key: tuple[float, str, int, int]  # (-score, save, situation, candidate): smaller is better

    def __lt__(self, other: _Ranked) -> bool:
        return self.key > other.key


def _best_of(
    exporter: Exporter, saves: list[Save], outcome: ExportOutcome, report: Report
) -> set[tuple[str, int]] | None:
    """With `best_of`, a first pass keeps the k best examples of each task across saves."""
    policy = exporter.selection or SelectionPolicy()
    if policy.best_of is None:
        return None
    best: dict[Task, list[_Ranked]] = {}
    for save in saves:
        graph = _read(save, outcome, report)
        if graph is None:
            continue
        heap = best.setdefault(save.task, [])
        for example in _examples(exporter, graph):
            ranked = _Ranked(
                (-example.score, save.name, example.situation_id, example.candidate_id)
            )
            if len(heap) < policy.best_of:
                heapq.heappush(heap, ranked)
            elif ranked.key < heap[0].key:
                heapq.heapreplace(heap, ranked)
    return {(ranked.key[1], ranked.key[3]) for heap in best.values() for ranked in heap}


def _render(
    exporter: Exporter,
    shuffle: Shuffle,
    save: Save,
    key: SplitKey,
    graph: SavedGraph,
    kept: set[tuple[str, int]] | None,
    writer: DatasetWriter,
    failures: list[dict[str, Any]],
) -> None:
    examples = _examples(exporter, graph)
    if kept is not None:
        examples = [example for example in examples if (save.name, example.candidate_id) in kept]
    items: Iterator[Any] = iter(exporter.rows(graph, examples, shuffle))
    for item in items:
        if isinstance(item, RowFailure):
            failures.append({"source": save.name, "example": item.example, "error": item.reason})
        else:
            writer.add(item.channel, key, item.data)
