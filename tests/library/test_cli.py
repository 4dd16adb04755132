"""`gencoach library build|append|info|query` as a person runs them."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from gencoach.cli import app
from gencoach.library import CanonicalDatasetAdapter, DatasetQuery
from gencoach.library.cli import build
from tests.library.sources import coached_save, magma_save

runner = CliRunner()


def test_build_info_and_query(saves: Path, tmp_path: Path) -> None:
    """Build prints what it read; info the counts; query the count and the first rows."""
    lib = tmp_path / "lib"
    built = runner.invoke(app, ["library", "build", str(saves), "--output", str(lib)])
    assert built.exit_code == 0, built.output
    assert built.stdout.startswith(f"built {lib} (release 1): 19 new trajectories, ")
    info = runner.invoke(app, ["library", "info", str(lib)])
    assert info.exit_code == 0
    assert "trajectories: 19, tasks: 5, sources: 5" in info.stdout
    assert "outcome: failure 8, success 11" in info.stdout
    query = runner.invoke(
        app, ["library", "query", str(lib), "--selection", "best", "--limit", "2"]
    )
    assert query.exit_code == 0
    assert query.stdout.splitlines()[0] == "5 trajectories in 5 tasks"
    assert query.stdout.count("│ success │") == 2


def test_skipped_sources_exit_1_and_are_named(saves: Path, tmp_path: Path) -> None:
    """A path that holds nothing is named on stderr and the exit code says so."""
    missing = tmp_path / "nowhere"
    result = runner.invoke(
        app, ["library", "build", str(saves), str(missing), "-o", str(tmp_path / "lib")]
    )
    assert result.exit_code == 1
    assert f"skipped {missing}: does not exist" in result.stderr


def test_bad_query_values_exit_2_with_the_reason(saves: Path, tmp_path: Path) -> None:
    """An unknown outcome is refused with the accepted values."""
    runner.invoke(app, ["library", "build", str(saves), "-o", str(tmp_path / "lib")])
    result = runner.invoke(app, ["library", "query", str(tmp_path / "lib"), "--outcome", "won"])
    assert result.exit_code == 2
    assert result.stderr == (
        "error: outcomes: unknown value 'won'; one of: success, failure, ongoing, unknown\n"
    )


def test_not_a_library_exits_2(tmp_path: Path) -> None:
    """Opening a folder without a manifest says it is not a complete library."""
    result = runner.invoke(app, ["library", "info", str(tmp_path)])
    assert result.exit_code == 2
    assert "is not a complete library (no manifest.json" in result.stderr


def test_append_writes_a_new_library_and_its_report(tmp_path: Path) -> None:
    """Append prints what was added and leaves the report beside the new manifest."""
    coached_save(tmp_path / "a" / "run-1")
    magma_save(tmp_path / "b" / "magma-1")
    runner.invoke(app, ["library", "build", str(tmp_path / "a"), "-o", str(tmp_path / "v1")])
    result = runner.invoke(
        app,
        ["library", "append", "--base", str(tmp_path / "v1"), "--input", str(tmp_path / "b"),
         "--output", str(tmp_path / "v2"), "--release", "2"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "2 new trajectories, 0 duplicates collapsed, from 1 sources" in result.stdout
    report = json.loads((tmp_path / "v2" / "append_report.json").read_text())
    assert report["accepted"] == 2
    assert report["release"] == "2"
    training = runner.invoke(
        app,
        ["library", "query", str(tmp_path / "v2"), "--training",
         "--sample", "2", "--seed", "1", "--strategy", "by_task"],
    )  # fmt: skip
    assert training.exit_code == 0
    assert training.stdout.splitlines()[0] == "2 trajectories in 2 tasks"


def test_import_review_append_from_the_command_line(tmp_path: Path) -> None:
    """`canonical` writes a source's records; once reviewed, `append --input` takes the file
    (exit 0), and the grown library holds that source under its own id."""
    coached_save(tmp_path / "a" / "run-1")
    magma_save(tmp_path / "b" / "magma-1")
    runner.invoke(app, ["library", "build", str(tmp_path / "a"), "-o", str(tmp_path / "v1")])
    imported = tmp_path / "canonical" / "magma-1.jsonl"
    written = runner.invoke(app, ["library", "canonical", str(tmp_path / "b"), "-o", str(imported)])
    assert written.exit_code == 0, written.output
    result = runner.invoke(
        app,
        ["library", "append", "--base", str(tmp_path / "v1"), "--input", str(imported),
         "--output", str(tmp_path / "v2"), "--release", "2"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    with CanonicalDatasetAdapter(tmp_path / "v2") as lib:
        assert lib.available_sources() == ["save:magma-1", "save:run-1"]


def test_a_federated_build_and_its_overlay_from_the_command_line(
    saves: Path, tmp_path: Path
) -> None:
    """`build --metadata-only --permissions` indexes a source without its payloads and
    audits the saves; `canonical` writes the overlay a reader is given."""
    chat = tmp_path / "restricted.jsonl"
    chat.write_text(json.dumps({"prompt": "2+2?", "completion": "4"}) + "\n")
    audit = tmp_path / "permissions.yaml"
    audit.write_text('sources:\n  "save:*": {model_training: permitted}\n')
    lib = tmp_path / "lib"
    built = runner.invoke(app, ["library", "build", str(saves), "--metadata-only", str(chat),
                                "--permissions", str(audit), "-o", str(lib)])  # fmt: skip
    assert built.exit_code == 0, built.output
    overlay = tmp_path / "authorized.jsonl"
    written = runner.invoke(app, ["library", "canonical", str(chat), "-o", str(overlay)])
    assert written.exit_code == 0, written.output
    assert written.stdout == f"wrote 1 canonical records from 1 sources to {overlay}\n"

    with CanonicalDatasetAdapter(lib) as plain:
        assert plain.content_availability("chat:restricted.jsonl") == "metadata_only"
        assert plain.permissions("save:run-1").dimensions["model_training"] == "permitted"
        assert plain.permissions("chat:restricted.jsonl").dimensions["model_training"] == (
            "unknown"
        )
    overlays = {"chat:restricted.jsonl": overlay}
    with CanonicalDatasetAdapter(lib, content_overlays=overlays) as joined:
        (record,) = joined.iter_records(DatasetQuery(source_ids="chat:restricted.jsonl"))
        assert record.trajectory.supervised_targets == [{"role": "assistant", "content": "4"}]


class _Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_a_progress_bar_and_the_skips_above_it(
    saves: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a TTY, build tracks its sources with a bar (as an export tracks its saves) and
    still names each skipped path; `--no-progress` keeps the terminal free of the bar."""
    for progress, lib in ((True, "lib"), (False, "quiet")):
        terminal = _Terminal()
        monkeypatch.setattr(sys, "stderr", terminal)
        with pytest.raises(typer.Exit) as ended:
            build(tmp_path / lib, [saves, tmp_path / "nowhere"], progress=progress)
        assert ended.value.exit_code == 1
        shown = terminal.getvalue()
        assert ("reading sources" in shown) is progress
        assert f"skipped {tmp_path / 'nowhere'}: does not exist" in shown
