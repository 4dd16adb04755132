"""`gencoach export`: the command's behaviour, one-line messages and exit codes.

Exit codes: 0 when the export is complete (or a complete one was reused), 1 when it was
written but some saves or examples failed (listed in `export_failures.json`), 2 when it
could not run at all and nothing was written.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from gencoach.errors import ExportError
from gencoach.export.manifest import FAILURES_FILE
from gencoach.export.options import load_options
from gencoach.export.progress import display
from gencoach.export.runner import ExportOutcome, ExportSettings, run_export
from gencoach.export.splits import Folder
from gencoach.export.tokens import TokenSettings

EXIT_OK: Final = 0
EXIT_FAILURES: Final = 1
EXIT_UNUSABLE: Final = 2


@dataclass(frozen=True)
class ExportFilters:
    """The `--case`, `--since`, `--limit` and `--from` flags."""

    cases: tuple[str, ...] = ()
    since: str | None = None
    limit: int | None = None
    from_agents: tuple[str, ...] = ()


def export_command(
    source: Path,
    fmt: str,
    options_file: Path | None,
    validation_ratio: float,
    split_seed: int,
    shuffle_seed: int,
    skip_pre_made: bool,
    out: Path | None,
    progress: bool,
    agent: str | None = None,
    any_agent: bool = False,
    split_by: str = "task",
    filters: ExportFilters = ExportFilters(),
    dedupe: bool | None = None,
    tokens: tuple[Path | None, int | None, str] = (None, None, "keep"),
) -> int:
    """Export the saves below `source` in format `fmt` (or with a MAGMA agent's exporter)."""
    tokenizer, max_tokens, over_budget = tokens
    try:
        if tokenizer is None and (max_tokens is not None or over_budget != "keep"):
            raise ExportError("--max-tokens and --over-budget need --tokenizer")
        budget = None if tokenizer is None else TokenSettings(tokenizer, max_tokens, over_budget)
        settings = ExportSettings(
            source=source,
            format=fmt,
            options=load_options(options_file),
            validation_ratio=validation_ratio,
            split_seed=split_seed,
            shuffle_seed=shuffle_seed,
            skip_pre_made=skip_pre_made,
            out=out,
            agent=agent,
            any_agent=any_agent,
            split_by=split_by,
            cases=filters.cases,
            since=filters.since,
            limit=filters.limit,
            from_agents=filters.from_agents,
            dedupe=dedupe,
            tokens=budget,
        )
        with display(progress) as screen:
            outcome = run_export(settings, report=screen.say, track=screen.track)
    except ExportError as error:
        print(f"error: {error.reason}", file=sys.stderr)
        return EXIT_UNUSABLE
    print(summary(outcome))
    if outcome.failures:
        where = outcome.destination / FAILURES_FILE
        print(f"{_count(len(outcome.failures), 'failure')}: see {where}", file=sys.stderr)
        return EXIT_FAILURES
    return EXIT_OK


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def summary(outcome: ExportOutcome) -> str:
    """One line saying what the export did."""
    rows = sum(outcome.rows.values())
    per_channel = ", ".join(f"{channel}: {count}" for channel, count in outcome.rows.items())
    if outcome.reused:
        return (
            f"reused the complete export in {outcome.destination} "
            f"({_count(rows, 'row')}; sources, settings and file hashes unchanged)"
        )
    line = (
        f"exported {_count(rows, 'row')} ({per_channel}) from {_count(outcome.saves, 'save')} "
        f"to {outcome.destination}"
    )
    if outcome.partition is not None:
        split = outcome.partition
        unit = "folder" if any(isinstance(key, Folder) for key in split.train) else "task"
        line += (
            f"; {_count(len(split.train), f'train {unit}')}, "
            f"{_count(len(split.validation), f'validation {unit}')}"
        )
    if outcome.skipped:
        line += f"; {_count(len(outcome.skipped), 'save')} skipped"
    for (agent_id, version), counts in sorted(outcome.agents.items()):
        line += f"; {agent_id} {version}: {counts.graded} graded, {counts.kept} kept"
    duplicates = outcome.counts.get("duplicate_turns")
    dropped = outcome.counts.get("duplicate_rows", 0)
    if duplicates:
        line += f"; {_count(duplicates, 'duplicate turn')} trained once"
        if dropped:
            line += f" ({_count(dropped, 'row')} left out)"
    elif dropped:  # rows of one target each (full-history)
        line += f"; {_count(dropped, 'duplicate row')} left out"
    cut = outcome.counts.get("split_rows", 0)
    if cut:
        line += f"; {_count(cut, 'whole-run row')} split where the system message or tools changed"
    if outcome.tokens is not None:
        line += f"; {outcome.tokens.summary()}"
    return line
