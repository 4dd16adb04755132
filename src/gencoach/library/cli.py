"""`gencoach library`: build, append to, describe and query trajectory libraries.

Exit codes: 0 when everything given was read, 1 when the library was written but some
sources were skipped (each named on stderr), 2 when nothing was written.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer

from gencoach.library.errors import LibraryError
from gencoach.library.query import ALIASES, TrainingView, TrajectorySelection
from gencoach.library.records import (
    ContentAvailability,
    Outcome,
    Provenance,
    QualityTier,
    Split,
)

if TYPE_CHECKING:
    from gencoach.export.tool_failures import ToolFailures
    from gencoach.library.adapter import CanonicalDatasetAdapter
    from gencoach.library.build import BuildResult

EXIT_OK: Final = 0
EXIT_SKIPPED: Final = 1
EXIT_UNUSABLE: Final = 2
READING: Final = "reading sources"
"""What the progress bar of `build` and `append` says."""

library_app = typer.Typer(
    help="Trajectory libraries: canonical, queryable, read-only stores for training.",
    no_args_is_help=True,
)


def _error(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)


def _say(message: str) -> None:
    print(message, file=sys.stderr)


def _finish(verb: str, result: BuildResult) -> int:
    counts = result.counts
    print(
        f"{verb} {result.output} (release {result.release}): {result.accepted} new "
        f"trajectories, {result.duplicates} duplicates collapsed, from {result.sources_read} "
        f"sources; {counts.get('trajectories', 0)} trajectories in {counts.get('tasks', 0)} tasks"
    )
    if result.skipped:
        print(f"{len(result.skipped)} source(s) skipped (see above)", file=sys.stderr)
        return EXIT_SKIPPED
    return EXIT_OK


Progressive = Annotated[
    bool, typer.Option("--progress/--no-progress", help="A progress bar on a terminal.")
]
Permissions = Annotated[
    Path | None,
    typer.Option("--permissions", help="A file of source permission audits (JSON or YAML)."),
]
ToolFailuresFile = Annotated[
    Path | None,
    typer.Option(
        "--tool-failures",
        help="A file of the tools' own failure predicates (JSON or YAML: tool → RE2 "
        'pattern, {"pattern": ...} or {"callable": "module:function"}); a decision whose '
        "every call one recognises is not trainable.",
    ),
]


def _failures(path: Path | None) -> ToolFailures:
    from gencoach.export.tool_failures import NO_PREDICATES
    from gencoach.library.declarations import read_tool_failures

    return read_tool_failures(path) if path is not None else NO_PREDICATES


@library_app.command("build")
def build(
    output: Annotated[Path, typer.Option("--output", "-o", help="The new library folder.")],
    sources: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Save folders, folders of saves, conversation .jsonl, SWE-agent "
            ".traj, τ-bench results .json, .parquet or saved datasets folders."
        ),
    ] = None,
    release: Annotated[str, typer.Option("--release", help="A name for this release.")] = "1",
    split_seed: Annotated[int, typer.Option("--split-seed", help="Seed of the task splits.")] = 0,
    metadata_only: Annotated[
        list[Path] | None,
        typer.Option("--metadata-only", help="A source indexed without its payloads (repeat)."),
    ] = None,
    permissions: Permissions = None,
    tool_failures: ToolFailuresFile = None,
    progress: Progressive = True,
) -> None:
    """Build a new library from sources (a source that cannot be read is skipped)."""
    from gencoach.export.progress import display
    from gencoach.library.build import build_library

    try:
        failures = _failures(tool_failures)
        with display(progress, READING) as screen:
            result = build_library(
                sources or [], output, release, split_seed=split_seed,
                metadata_only=metadata_only or [], permissions=permissions, failures=failures,
                track=screen.track, say=screen.say,
            )  # fmt: skip
    except LibraryError as error:
        _error(str(error))
        raise typer.Exit(EXIT_UNUSABLE) from None
    raise typer.Exit(_finish("built", result))


@library_app.command("append")
def append(
    base: Annotated[Path, typer.Option("--base", help="The library to grow (left unchanged).")],
    inputs: Annotated[list[Path], typer.Option("--input", "-i", help="A new source (repeat).")],
    output: Annotated[Path, typer.Option("--output", "-o", help="The new library folder.")],
    release: Annotated[str, typer.Option("--release", help="A name for the new release.")],
    permissions: Permissions = None,
    tool_failures: ToolFailuresFile = None,
    progress: Progressive = True,
) -> None:
    """Make a new library: the base plus new sources, writing append_report.json."""
    from gencoach.export.progress import display
    from gencoach.library.build import append_library

    try:
        failures = _failures(tool_failures)
        with display(progress, READING) as screen:
            result = append_library(
                base, inputs, output, release, permissions=permissions, failures=failures,
                track=screen.track, say=screen.say,
            )  # fmt: skip
    except LibraryError as error:
        _error(str(error))
        raise typer.Exit(EXIT_UNUSABLE) from None
    raise typer.Exit(_finish("appended to", result))


def _open(path: Path) -> CanonicalDatasetAdapter:
    from gencoach.library.adapter import CanonicalDatasetAdapter

    try:
        return CanonicalDatasetAdapter(path)
    except LibraryError as error:
        _error(str(error))
        raise typer.Exit(EXIT_UNUSABLE) from None


@library_app.command("info")
def info(library: Annotated[Path, typer.Argument(help="A library folder.")]) -> None:
    """Print a library's release, counts and composition."""
    with _open(library) as lib:
        data = lib.manifest.data
        releases = ", ".join(data.get("releases", [lib.release]))
        print(f"library {library}: release {lib.release} (releases: {releases})")
        print(f"format {data['format_version']}, api {data.get('api_version')}, "
              f"{len(data['shards'])} shards")  # fmt: skip
        print(", ".join(f"{key}: {value}" for key, value in lib.manifest.counts.items()))
        for column in ("split", "outcome", "quality_tier", "provenance", "scenario", "benchmark"):
            groups = lib.group_counts(column)
            print(f"{column}: " + ", ".join(f"{key} {value}" for key, value in groups.items()))


def _accepting(text: str, values: Iterable[str] = ()) -> Any:
    """A filter option, repeatable; `values` lists its closed vocabulary."""
    listed = f" One of: {', '.join(values)}." if values else ""
    return typer.Option(metavar="<value>", help=f"{text}{listed}")


def _names(kind: type[StrEnum]) -> list[str]:
    return [member.value for member in kind] + sorted(ALIASES.get(kind, {}))


_ROUTE_NAMES = ("format", "failure", "no_action", "exceeded", "suboptimal", "text_rewrite")


@library_app.command("canonical")
def canonical(
    sources: Annotated[list[Path], typer.Argument(help="Sources, as `build` takes them.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="The .jsonl file to write.")],
    tool_failures: ToolFailuresFile = None,
) -> None:
    """Write the canonical records of sources to a file: an overlay for a library that
    indexes them metadata-only (give it the build's --tool-failures file)."""
    from gencoach.library.build import write_canonical

    try:
        result = write_canonical(sources, output, failures=_failures(tool_failures), say=_say)
    except LibraryError as error:
        _error(str(error))
        raise typer.Exit(EXIT_UNUSABLE) from None
    print(f"wrote {result.accepted} canonical records from {result.sources_read} sources "
          f"to {output}")  # fmt: skip
    raise typer.Exit(EXIT_SKIPPED if result.skipped else EXIT_OK)


@library_app.command("query")
def query(
    library: Annotated[Path, typer.Argument(help="A library folder.")],
    benchmark: Annotated[
        list[str] | None, _accepting("A benchmark family, generator/scenario for saves.")
    ] = None,
    scenario: Annotated[list[str] | None, _accepting("A scenario name, e.g. buttons.")] = None,
    target: Annotated[list[str] | None, _accepting("A task's target, e.g. a button id.")] = None,
    task_key: Annotated[
        list[str] | None,
        _accepting("A task key, scenario/target/<hash> (the `task` column below)."),
    ] = None,
    environment_key: Annotated[
        list[str] | None, _accepting("An environment key, generator@version/scenario@version.")
    ] = None,
    source_id: Annotated[
        list[str] | None, _accepting("A source, save:<run_id> or chat:<file name>.")
    ] = None,
    agent: Annotated[list[str] | None, _accepting("An agent, id or id@version.")] = None,
    split: Annotated[list[str] | None, _accepting("A task split.", _names(Split))] = None,
    provenance: Annotated[
        list[str] | None,
        _accepting("Where the decisions come from.", _names(Provenance)),
    ] = None,
    route: Annotated[
        list[str] | None, _accepting("A coaching route on the path.", _ROUTE_NAMES)
    ] = None,
    outcome: Annotated[
        list[str] | None, _accepting("How the trajectory ended.", _names(Outcome))
    ] = None,
    tier: Annotated[list[str] | None, _accepting("A quality tier.", _names(QualityTier))] = None,
    view: Annotated[list[str] | None, _accepting("A training view.", _names(TrainingView))] = None,
    availability: Annotated[
        list[str] | None,
        _accepting("Whether the payload can be read.", _names(ContentAvailability)),
    ] = None,
    selection: Annotated[
        str,
        typer.Option(
            help="Trajectories per task. One of: " + ", ".join(_names(TrajectorySelection)) + "."
        ),
    ] = "all",
    training: Annotated[
        bool, typer.Option("--training", help="Eligibility gates; never protected_evaluation.")
    ] = False,
    sample: Annotated[int | None, typer.Option(help="Draw this many rows.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the draw.")] = 0,
    strategy: Annotated[
        str,
        typer.Option(help="How draws spread, with --sample: uniform, task, source_balanced."),
    ] = "uniform",
    with_replacement: Annotated[
        bool,
        typer.Option(
            "--with-replacement",
            help="With --sample: a row may be drawn again, so more rows than match can be drawn.",
        ),
    ] = False,
    limit: Annotated[int, typer.Option(help="Rows to show.")] = 5,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the selected examples here.")
    ] = None,
    shape: Annotated[
        str, typer.Option("--format", help="chat, full_trajectory or assistant_turn.")
    ] = "chat",
) -> None:
    """Print how many trajectories a query selects and the first few (index only), or
    write the selected examples as JSONL (`--output`).

    A filter given several times matches any of its values; every filter given must match.
    """
    from rich.table import Table

    from gencoach.library.query import DatasetQuery
    from gencoach.library.sampling import SamplingConfig
    from gencoach.runtime.terminal import fitted_console

    criteria = {
        "benchmarks": benchmark, "scenarios": scenario, "targets": target,
        "task_keys": task_key, "environment_keys": environment_key, "source_ids": source_id,
        "agents": agent, "splits": split, "demonstration_provenance": provenance,
        "routes": route, "outcomes": outcome, "quality_tiers": tier, "supported_views": view,
        "content_availability": availability, "selection": selection,
    }  # fmt: skip
    given: dict[str, Any] = {key: value for key, value in criteria.items() if value is not None}
    try:
        chosen = DatasetQuery.for_training(**given) if training else DatasetQuery(**given)
        sampling = None
        if sample is not None:
            sampling = SamplingConfig(sample, seed, strategy, with_replacement)  # type: ignore[arg-type]
    except LibraryError as error:
        _error(str(error))
        raise typer.Exit(EXIT_UNUSABLE) from None
    with _open(library) as lib:
        rows = lib.select(chosen, sampling)
        if output is not None:
            from gencoach.library.output import write_examples

            try:
                written = write_examples(lib, rows, output, shape)
            except LibraryError as error:
                _error(str(error))
                raise typer.Exit(EXIT_UNUSABLE) from None
            print(f"wrote {written} {shape} examples of {len(rows)} trajectories to {output}")
            return
    tasks = len({row.task_key for row in rows})
    print(f"{len(rows)} trajectories in {tasks} tasks")
    table = Table("id", "task", "split", "outcome", "tier", "rank", "reward", "provenance")
    for row in rows[:limit]:
        reward = "-" if row.reward is None else f"{row.reward:g}"
        table.add_row(row.trajectory_id, row.task_key, row.split, row.outcome_category,
                      row.quality_tier, str(row.quality_rank), reward,
                      row.demonstration_provenance)  # fmt: skip
    if rows and limit > 0:
        fitted_console().print(table)
