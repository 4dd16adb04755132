"""`gencoach library`: build, append to, describe and query trajectory libraries.

Exit codes: 0 when everything given was read, 1 when the library was written but some
sources were skipped (each named on stderr), 2 when nothing was written.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer

from gencoach.library.errors import LibraryError

if TYPE_CHECKING:
    from gencoach.library.adapter import CanonicalDatasetAdapter
    from gencoach.library.build import BuildResult, Track
    from gencoach.library.sources.base import SourceAdapter

EXIT_OK: Final = 0
EXIT_SKIPPED: Final = 1
EXIT_UNUSABLE: Final = 2

library_app = typer.Typer(
    help="Trajectory libraries: canonical, queryable, read-only stores for training.",
    no_args_is_help=True,
)


def _error(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)


def _say(message: str) -> None:
    print(message, file=sys.stderr)


@contextmanager
def _progress(wanted: bool) -> Iterator[tuple[Track, Callable[[str], None]]]:
    from rich.console import Console
    from rich.progress import Progress

    if not (wanted and sys.stderr.isatty()):
        yield (lambda sources: sources), _say
        return
    with Progress(console=Console(stderr=True), transient=True) as bar:

        def track(sources: Sequence[SourceAdapter]) -> Iterable[SourceAdapter]:
            return bar.track(sources, total=len(sources), description="reading sources")

        def say(message: str) -> None:
            bar.console.print(message, markup=False, highlight=False, soft_wrap=True)

        yield track, say


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


@library_app.command("build")
def build(
    sources: Annotated[
        list[Path], typer.Argument(help="Save folders, folders of saves, chat .jsonl files.")
    ],
    output: Annotated[Path, typer.Option("--output", "-o", help="The new library folder.")],
    release: Annotated[str, typer.Option("--release", help="A name for this release.")] = "1",
    split_seed: Annotated[int, typer.Option("--split-seed", help="Seed of the task splits.")] = 0,
    progress: Progressive = True,
) -> None:
    """Build a new library from sources (a source that cannot be read is skipped)."""
    from gencoach.library.build import build_library

    try:
        with _progress(progress) as (track, say):
            result = build_library(
                sources, output, release, split_seed=split_seed, track=track, say=say
            )
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
    progress: Progressive = True,
) -> None:
    """Make a new library: the base plus new sources, writing append_report.json."""
    from gencoach.library.build import append_library

    try:
        with _progress(progress) as (track, say):
            result = append_library(base, inputs, output, release, track=track, say=say)
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
        for column in ("split", "outcome", "quality_tier", "provenance", "scenario"):
            groups = lib.group_counts(column)
            print(f"{column}: " + ", ".join(f"{key} {value}" for key, value in groups.items()))


Many = Annotated[list[str] | None, typer.Option(help="Accepted values (repeat the option).")]


@library_app.command("query")
def query(
    library: Annotated[Path, typer.Argument(help="A library folder.")],
    scenario: Many = None,
    target: Many = None,
    task_key: Many = None,
    environment_key: Many = None,
    source_id: Many = None,
    agent: Many = None,
    split: Many = None,
    provenance: Many = None,
    route: Many = None,
    outcome: Many = None,
    tier: Many = None,
    view: Many = None,
    selection: Annotated[str, typer.Option(help="all, successful or best.")] = "all",
    training: Annotated[
        bool, typer.Option("--training", help="Eligibility gates; never protected_evaluation.")
    ] = False,
    sample: Annotated[int | None, typer.Option(help="Draw this many rows.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the draw.")] = 0,
    strategy: Annotated[str, typer.Option(help="uniform, by_task, source_balanced.")] = "uniform",
    with_replacement: Annotated[bool, typer.Option("--with-replacement")] = False,
    limit: Annotated[int, typer.Option(help="Rows to show.")] = 5,
) -> None:
    """Print how many trajectories a query selects and the first few (index only)."""
    from rich.table import Table

    from gencoach.library.query import DatasetQuery
    from gencoach.library.sampling import SamplingConfig
    from gencoach.terminal import fitted_console

    criteria = {
        "scenarios": scenario, "targets": target, "task_keys": task_key,
        "environment_keys": environment_key, "source_ids": source_id, "agents": agent,
        "splits": split, "provenance": provenance, "routes": route, "outcomes": outcome,
        "quality_tiers": tier, "views": view, "selection": selection,
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
        rows = lib.metadata(chosen, sampling)
    tasks = len({row.task_key for row in rows})
    print(f"{len(rows)} trajectories in {tasks} tasks")
    table = Table("id", "task", "split", "outcome", "tier", "rank", "reward", "provenance")
    for row in rows[:limit]:
        reward = "-" if row.reward is None else f"{row.reward:g}"
        table.add_row(row.id, row.task_key, row.split, row.outcome, row.quality_tier,
                      str(row.rank), reward, row.provenance)  # fmt: skip
    if rows and limit > 0:
        fitted_console().print(table)
