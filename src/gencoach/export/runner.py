"""One export: find the saves, select, render through the format, split, write."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Final

from pydantic import JsonValue

from gencoach.errors import ExportError, SaveError
from gencoach.export.destination import DATASETS_DIR, claim, default_destination
from gencoach.export.discovery import load_exporter
from gencoach.export.filters import FILTER_KEYS, RunFilter
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
from gencoach.export.producers import Accepted, check_producers, parse_agents, parse_from
from gencoach.export.ranking import BestOf, Kept
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
from gencoach.export.tokens import TokenBudget, TokenReport, TokenSettings
from gencoach.export.tool_failures import NO_PREDICATES, ToolFailures
from gencoach.export.writer import DatasetWriter, Rewrite
from gencoach.graph import CONFIG_FILE, SavedGraph, read_save

Report = Callable[[str], None]
Track = Callable[[Iterable[Save], int], Iterable[Save]]
SPLITS: Final = ("task", "folder")
DEDUPING: Final = ("chat", "full-history")
"""The built-in formats that take `dedupe` (and so the flags)."""


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
    cases: tuple[str, ...] = ()
    since: str | None = None
    limit: int | None = None
    from_agents: tuple[str, ...] = ()
    dedupe: bool | None = None
    tool_failures: ToolFailures = NO_PREDICATES
    tokens: TokenSettings | None = None

    @property
    def label(self) -> str:
        """The format's name, or `agent-<NAME>` for a MAGMA exporter."""
        return f"agent-{self.agent}" if self.agent is not None else self.format

    @property
    def destination(self) -> Path:
        """`--out`, or `SOURCE/datasets/<label>`."""
        return self.out if self.out is not None else default_destination(self.source, self.label)


@dataclass
class AgentCounts:
    """Per producer: the runs read (after the filters) and those that gave a row."""

    graded: int = 0
    kept: int = 0


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
    agents: dict[tuple[str, str], AgentCounts] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    tokens: TokenReport | None = None

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
    run_filter, accepted, format_options = _run_options(settings)
    exporter = _exporter(settings, format_options)
    if isinstance(exporter, MagmaExporter):
        accepted = [Accepted(exporter.agent_id, frozenset([exporter.agent_version]))]
    exporter.tool_failures = settings.tool_failures.merged(exporter.tool_failures)
    budget = None if settings.tokens is None else TokenBudget(settings.tokens)
    destination = settings.destination
    claim(destination, exporter.label)
    excluded = (settings.source / DATASETS_DIR, destination)
    found = discover(settings.source, exclude=excluded)
    for skipped in found.skipped:
        report(f"skipped {skipped.reason}")
    if not found.saves:
        raise ExportError(_nothing_usable(settings, found))
    chosen = run_filter.apply(found.saves)
    if not chosen:
        raise ExportError(
            f"no save under {settings.source} passes the filters "
            f"({_filters(run_filter)}): {len(found.saves)} read"
        )
    compatible, found.refused, policy = check_producers(
        chosen, accepted, settings.any_agent, str(settings.source), settings.agent
    )
    failures: list[dict[str, Any]] = []
    for refused in found.refused:
        failures.append({"source": refused.name, "example": None, "error": refused.reason})
        report(f"refused {refused.name}: {refused.reason}")
    if not compatible:
        raise ExportError(_nothing_compatible(settings, found, policy))
    recorded = {
        "format": exporter.label,
        "exporter_version": exporter.release,
        "options": format_options,
        "filters": run_filter.to_json(),
        "producers": [str(item) for item in policy],
        "validation_ratio": settings.validation_ratio,
        "split_by": settings.split_by,
        "split_seed": settings.split_seed,
        "shuffle_seed": settings.shuffle_seed,
        "producer": producer(),
    }
    if exporter.tool_failures.predicates:
        recorded["tool_failures"] = sorted(exporter.tool_failures.predicates)
    if settings.tokens is not None:
        recorded["tokens"] = settings.tokens.to_json()
    expected = signature(found.digests, recorded)
    if settings.skip_pre_made and not failures:
        manifest = completed_export(destination, expected)
        if manifest is not None:
            rows = manifest.get("rows")
            return ExportOutcome(destination, True, dict(rows) if isinstance(rows, dict) else {})
    outcome = ExportOutcome(destination, reused=False, rows={}, skipped=list(found.skipped))
    outcome.failures = failures
    kept = _best_of(exporter, compatible, outcome, report)
    by_folder = settings.split_by == "folder"
    if by_folder:  # MAGMA-GEN's order: the config files' paths, compared part by part
        compatible.sort(key=lambda save: PurePosixPath(save.name, CONFIG_FILE).parts)
    shuffle = Shuffle(settings.shuffle_seed, stream=by_folder)
    writer = DatasetWriter(destination, exporter.channels)
    try:
        folders: list[Folder] = []
        for save in track(compatible, len(compatible)):
            graph = _read(save, outcome, report)
            if graph is None:
                continue
            outcome.saves += 1
            key: SplitKey = Folder(save.name) if by_folder else save.task
            folders.append(Folder(save.name))
            counts = outcome.agents.setdefault(save.producer, AgentCounts())
            counts.graded += 1
            job = _Render(exporter, shuffle, save, key, graph, kept, writer, failures, budget)
            if job.run():
                counts.kept += 1
        if outcome.saves == 0:
            raise ExportError(f"no usable save under {settings.source}: none could be read")
        if by_folder:
            split = partition_folders(folders, settings.validation_ratio, settings.split_seed)
        else:
            split = partition(_tasks(writer), settings.validation_ratio, settings.split_seed)
        outcome.counts = dict(exporter.counts)
        outcome.tokens = None if budget is None else budget.report()
        identity = {"signature": expected, "settings": recorded}
        _write(writer, outcome, split, identity, exporter.rewrite())
    except BaseException:
        writer.abort()
        raise
    return outcome


def _run_options(
    settings: ExportSettings,
) -> tuple[RunFilter, list[Accepted] | None, dict[str, JsonValue]]:
    """The run filters and accepted producers (options, then flags), and the rest."""
    options = dict(settings.options)
    run_level: dict[str, JsonValue] = {
        key: options.pop(key) for key in (*FILTER_KEYS, "agents") if key in options
    }
    if settings.cases:
        run_level["cases"] = list(settings.cases)
    if settings.since is not None:
        run_level["since"] = settings.since
    if settings.limit is not None:
        run_level["limit"] = settings.limit
    run_filter = RunFilter.parse(run_level)
    accepted: list[Accepted] | None = None
    if "agents" in run_level:
        accepted = parse_agents(run_level["agents"])
    if settings.from_agents:
        accepted = parse_from(settings.from_agents)
    if accepted is not None and (settings.agent is not None or settings.any_agent):
        raise ExportError(
            "--from and option 'agents' choose producers; they do not go with --agent (which "
            "exports its own agent's saves) nor with --any-agent (which exports every one)"
        )
    if settings.dedupe is not None:
        if settings.format not in DEDUPING:
            raise ExportError(
                "--dedupe/--no-dedupe apply to the chat and full-history formats only"
            )
        options["dedupe"] = settings.dedupe
    return run_filter, accepted, options


def _filters(run_filter: RunFilter) -> str:
    return ", ".join(f"{key} {value}" for key, value in run_filter.to_json().items() if value)


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
    if not settings.source.is_dir():
        raise ExportError(f"source {settings.source} is not a folder")


def _exporter(settings: ExportSettings, options: dict[str, JsonValue]) -> Exporter:
    if settings.agent is not None:
        return MagmaExporter(settings.agent, options)
    return load_exporter(settings.format, options)


def _tasks(writer: DatasetWriter) -> list[Task]:
    return [key for key in writer.tasks() if isinstance(key, Task)]


def _write(
    writer: DatasetWriter,
    outcome: ExportOutcome,
    split: Partition,
    identity: dict[str, Any],
    rewrite: Rewrite | None = None,
) -> None:
    """Stage the split files, the failures and the manifest (last), then move them in."""
    outcome.rows = dict(writer.counts)
    outcome.partition = split
    writer.stage(split, rewrite)
    writer.stage_document(FAILURES_FILE, outcome.failures)
    files = writer.hashes()
    manifest = {
        "producer": producer(),
        "complete": outcome.complete,
        **identity,
        "rows": outcome.rows,
        "saves": outcome.saves,
        "agents": agent_counts(outcome),
        "counts": outcome.counts,
        **({} if outcome.tokens is None else {"tokens": outcome.tokens.to_json()}),
        "split": split.to_json(),
        "skipped": [item.to_json() for item in outcome.skipped],
        "files": files,
    }
    writer.stage_document(MANIFEST_FILE, manifest)
    writer.commit()


def agent_counts(outcome: ExportOutcome) -> list[dict[str, Any]]:
    """Per producer, the runs read and the runs kept (that gave at least one row)."""
    return [
        {"agent_id": agent_id, "agent_version": version, "graded": c.graded, "kept": c.kept}
        for (agent_id, version), c in sorted(outcome.agents.items())
    ]


def _nothing_compatible(settings: ExportSettings, found: Discovery, policy: list[Accepted]) -> str:
    accepted = "; ".join(str(item) for item in policy) or "no producer of unknown identity"
    producers = sorted({f"{save.agent_id} {save.agent_version}" for save in found.saves})
    choose = (
        "export them with --any-agent, or with a built-in format and --from AGENT[@VERSION]"
        if settings.agent is not None
        else "choose with --from AGENT[@VERSION] or --any-agent"
    )
    return (
        f"no compatible save under {settings.source}: {_described(settings)} accepts "
        f"{accepted}, the saves were produced by {', '.join(producers)} ({choose})"
    )


def _nothing_usable(settings: ExportSettings, found: Discovery) -> str:
    if not found.digests:
        return f"no save under {settings.source}: no config.json found"
    return (
        f"no usable save under {settings.source}: {len(found.digests)} found, "
        f"{len(found.skipped)} skipped (unreadable or incomplete)"
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
    """The selected examples the format keeps (those that give a row)."""
    policy = exporter.selection
    if policy is None:
        return []
    return [
        example
        for example in select(graph, policy.min_score, exclude_fallbacks=exporter.exclude_fallbacks)
        if exporter.keeps(graph, example)
    ]


def _best_of(
    exporter: Exporter, saves: list[Save], outcome: ExportOutcome, report: Report
) -> Kept | None:
    """With `best_of`, a first pass keeps the k best examples of each task across saves."""
    policy = exporter.selection or SelectionPolicy()
    if policy.best_of is None:
        return None
    best = BestOf(policy.best_of)
    for save in saves:
        graph = _read(save, outcome, report)
        if graph is not None:
            examples = _examples(exporter, graph)
            best.offer(save, examples, [exporter.decision_key(graph, e) for e in examples])
    return best.kept()


@dataclass
class _Render:
    """One save's rows, through the token budget, into the writer."""

    exporter: Exporter
    shuffle: Shuffle
    save: Save
    key: SplitKey
    graph: SavedGraph
    kept: Kept | None
    writer: DatasetWriter
    failures: list[dict[str, Any]]
    budget: TokenBudget | None

    def run(self) -> bool:
        """Write the save's rows; whether it gave any."""
        examples = _examples(self.exporter, self.graph)
        if self.kept is not None:
            name, kept = self.save.name, self.kept
            examples = [e for e in examples if (name, e.candidate_id) in kept]
        wrote = False
        items: Iterator[Any] = iter(self.exporter.rows(self.graph, examples, self.shuffle))
        for item in items:
            if isinstance(item, RowFailure):
                failure = {"source": self.save.name, "example": item.example, "error": item.reason}
                self.failures.append(failure)
                continue
            data = item.data if self.budget is None else self.budget.fit(item.data)
            if data is not None:
                self.writer.add(item.channel, self.key, data)
                wrote = True
        return wrote
