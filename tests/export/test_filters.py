"""Which runs an export reads: `cases`, `since` and `limit`, as options and as flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gencoach.errors import ExportError
from gencoach.export.command import ExportFilters, export_command
from tests.support.exports import Export, read_rows
from tests.support.saved_runs import run_config, write_run


def _runs(source: Path) -> None:
    """Four runs of one agent (identical conversations: exports here turn `dedupe` off),
    two scenarios, started at 10:00, 11:00, 12:00 and unknown."""
    layout = [
        ("a", "buttons", "sw0-sw4", "reference-agent", "2026-12-01T10:00:00Z"),
        ("b", "buttons", "sw0-sw4", "reference-agent", "2026-12-01T11:00:00Z"),
        ("c", "sorting", "by-colour", "reference-agent", "2026-12-01T12:00:00+00:00"),
        ("d", "buttons", "sw0-sw4", "reference-agent", None),
    ]
    for name, scenario, target, agent, started in layout:
        config = run_config(
            f"run-{name}", scenario=scenario, target=target, agent_id=agent, started_at=started
        )
        write_run(source / name, config=config)


def _run_ids(source: Path) -> list[str]:
    rows = read_rows(source / "datasets" / "chat" / "chat.jsonl")
    return sorted({str(row["run_id"]) for row in rows})


def test_cases_keeps_the_saves_of_those_scenarios_or_targets(export: Export, source: Path) -> None:
    """A case names a scenario or a target."""
    _runs(source)
    export("chat", options={"cases": ["sorting"]}, dedupe=False)
    assert _run_ids(source) == ["run-c"]
    export("chat", options={"cases": ["sw0-sw4"]}, dedupe=False)
    assert _run_ids(source) == ["run-a", "run-b", "run-d"]


def test_since_keeps_runs_started_at_or_after_and_leaves_out_unknown_starts(
    export: Export, source: Path
) -> None:
    """11:00 keeps the 11:00 and 12:00 runs; a time without offset is UTC; a save that
    does not record its start is left out."""
    _runs(source)
    export("chat", options={"since": "2026-12-01T11:00:00Z"}, dedupe=False)
    assert _run_ids(source) == ["run-b", "run-c"]
    export("chat", options={"since": "2026-12-01T11:30:00"}, dedupe=False)
    assert _run_ids(source) == ["run-c"]


def test_limit_reads_the_newest_runs_of_each_agent(export: Export, source: Path) -> None:
    """`limit` 2: the two runs started last (an unknown start counts as oldest)."""
    _runs(source)
    export("chat", options={"limit": 2}, dedupe=False)
    assert _run_ids(source) == ["run-b", "run-c"]


def test_the_flags_replace_the_options(source: Path, tmp_path: Path) -> None:
    """`--case`, `--since` and `--limit` go where the options go, and win over them."""
    _runs(source)
    options = tmp_path / "options.json"
    options.write_text(json.dumps({"cases": ["sorting"]}))
    code = export_command(
        source,
        "chat",
        options,
        0.05,
        42,
        42,
        False,
        None,
        False,
        filters=ExportFilters(cases=("buttons",), since="2026-12-01T10:30:00Z", limit=3),
        dedupe=False,
    )
    assert code == 0
    assert _run_ids(source) == ["run-b"]
    manifest = json.loads((source / "datasets" / "chat" / "export_manifest.json").read_text())
    assert manifest["settings"]["filters"] == {
        "cases": ["buttons"],
        "since": "2026-12-01T10:30:00Z",
        "limit": 3,
    }


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"since": "yesterday"}, "option 'since' must be an ISO 8601 time such as"),
        ({"since": 3}, "option 'since' must be an ISO 8601 time, got 3"),
        ({"limit": 0}, "option 'limit' must be an integer of at least 1, got 0"),
        ({"cases": "buttons"}, "option 'cases' must be a list of case names, got 'buttons'"),
    ],
)
def test_bad_filters_are_named(
    export: Export, source: Path, options: dict[str, object], message: str
) -> None:
    """Each refused filter says what it must be."""
    _runs(source)
    with pytest.raises(ExportError) as caught:
        export("chat", options=options)
    assert caught.value.reason.startswith(message)
    assert not (source / "datasets" / "chat").exists()


def test_filters_that_leave_nothing_are_an_error(export: Export, source: Path) -> None:
    """No save passes: the export stops, names the filters, and writes nothing."""
    _runs(source)
    with pytest.raises(ExportError) as caught:
        export("chat", options={"cases": ["nothing"]})
    assert caught.value.reason == (
        f"no save under {source} passes the filters (cases ['nothing']): 4 read"
    )
