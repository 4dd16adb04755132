"""`gencoach export`'s run, producer, dedupe and token flags, as a person types them."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gencoach.cli import app
from tests.support.exports import read_rows
from tests.support.saved_runs import run_config, write_run

runner = CliRunner()


def _saves(source: Path) -> None:
    """Three runs of agent 1.0.0 (10:00 and 11:00 `buttons`, 12:00 `sorting`) and one of
    agent 2.0.0 (13:00 `buttons`)."""
    layout = [
        ("a", "buttons", "1.0.0", "10:00"),
        ("b", "buttons", "1.0.0", "11:00"),
        ("c", "sorting", "1.0.0", "12:00"),
        ("d", "buttons", "2.0.0", "13:00"),
    ]
    for name, scenario, version, time in layout:
        config = run_config(
            f"run-{name}",
            scenario=scenario,
            agent_version=version,
            started_at=f"2026-12-01T{time}:00Z",
        )
        write_run(source / name, config=config)


def _export(source: Path, *flags: str) -> tuple[int, str, str]:
    result = runner.invoke(
        app, ["export", str(source), "-f", "chat", "--no-progress", *flags], catch_exceptions=False
    )
    return result.exit_code, result.stdout, result.stderr


def _run_ids(source: Path) -> list[str]:
    rows = read_rows(source / "datasets" / "chat" / "chat.jsonl")
    return sorted({str(row["run_id"]) for row in rows})


def test_case_since_limit_and_from_choose_the_runs(source: Path) -> None:
    """`--from` picks the agent version, then `--case`, `--since` and `--limit` the runs;
    the manifest records the filters."""
    _saves(source)
    flags = ["--from", "reference-agent@1.0.0", "--no-dedupe"]
    code, out, err = _export(source, *flags, "--case", "buttons", "--since", "2026-12-01T10:30Z")
    assert (code, _run_ids(source)) == (1, ["run-b"]), out + err
    assert (
        err.splitlines()[-1]
        == f"1 failure: see {source / 'datasets' / 'chat' / 'export_failures.json'}"
    )
    code, out, err = _export(source, *flags, "--limit", "2")
    assert _run_ids(source) == ["run-c"], out + err
    manifest = json.loads((source / "datasets" / "chat" / "export_manifest.json").read_text())
    assert manifest["settings"]["filters"] == {"cases": None, "since": None, "limit": 2}
    assert manifest["settings"]["producers"] == ["reference-agent 1.0.0"]


def test_any_agent_exports_every_producer(source: Path) -> None:
    """Without a choice the two versions stop the export; `--any-agent` takes both."""
    _saves(source)
    code, out, err = _export(source)
    assert code == 2
    assert err.startswith(f"error: the saves under {source} were produced by several agents: ")
    assert out == ""
    code, out, err = _export(source, "--any-agent", "--no-dedupe")
    assert code == 0, err
    assert _run_ids(source) == ["run-a", "run-b", "run-c", "run-d"]
    assert out.endswith(
        "; reference-agent 1.0.0: 3 graded, 3 kept; reference-agent 2.0.0: 1 graded, 1 kept\n"
    )


def test_no_dedupe_keeps_repeated_turns(source: Path) -> None:
    """Three identical conversations of 1.0.0: deduped, the summary counts the repeats;
    `--no-dedupe` writes every row."""
    _saves(source)
    flags = ["--from", "reference-agent@1.0.0"]
    code, deduped, _ = _export(source, *flags)
    assert code == 1
    assert "duplicate turns trained once" in deduped
    rows = len(read_rows(source / "datasets" / "chat" / "chat.jsonl"))
    code, repeated, _ = _export(source, *flags, "--no-dedupe")
    assert "duplicate" not in repeated
    assert len(read_rows(source / "datasets" / "chat" / "chat.jsonl")) > rows


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--max-tokens", "10"], "error: --max-tokens and --over-budget need --tokenizer"),
        (["--over-budget", "drop"], "error: --max-tokens and --over-budget need --tokenizer"),
        (
            ["--tokenizer", "model.gguf", "--over-budget", "shorten"],
            "error: --over-budget must be one of keep, drop, truncate, got 'shorten'",
        ),
        (
            ["--tokenizer", "model.gguf", "--over-budget", "drop"],
            "error: --over-budget drop needs --max-tokens",
        ),
    ],
)
def test_token_flags_are_checked_before_anything_is_written(
    source: Path, flags: list[str], message: str
) -> None:
    """Inconsistent budget flags exit 2 with what they need, and write nothing."""
    write_run(source / "run")
    code, _, err = _export(source, *flags)
    assert (code, err) == (2, message + "\n")
    assert not (source / "datasets").exists()


@pytest.mark.skipif(
    importlib.util.find_spec("transformers") is not None, reason="transformers is installed"
)
def test_tokenizer_without_the_extra_names_it(source: Path) -> None:
    """`--tokenizer` in an install without the tokens extra says what to install."""
    write_run(source / "run")
    code, _, err = _export(source, "--tokenizer", "model.gguf", "--max-tokens", "100")
    assert code == 2
    assert err == (
        "error: --tokenizer needs transformers (and gguf for a GGUF file): install gencoach's "
        "tokens extra, pip install 'gencoach[tokens]'\n"
    )
