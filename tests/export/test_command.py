"""`gencoach export` as a person meets it: one-line messages and exit codes, bad inputs first."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from gencoach.errors import SaveError
from gencoach.export import export_command
from gencoach.graph import read_config, write_save
from tests.support.saved_runs import coached_run, run_config, write_run


def _run(source: Path, fmt: str = "chat", options: Path | None = None, **overrides: object) -> int:
    settings: dict[str, object] = {
        "validation_ratio": 0.05,
        "split_seed": 42,
        "shuffle_seed": 42,
        "skip_pre_made": False,
        "out": None,
        "progress": True,  # no terminal under pytest: plain messages
    }
    settings.update(overrides)
    return export_command(source, fmt, options, **settings)  # type: ignore[arg-type]


def _lines(text: str) -> list[str]:
    return text.splitlines()


def test_a_good_export_prints_one_summary_line(
    source: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 0 and a single line saying rows, saves, destination and the split."""
    write_run(source / "run")
    assert _run(source) == 0
    out, err = capsys.readouterr()
    assert _lines(out) == [
        f"exported 4 rows (chat: 4) from 1 save to {source / 'datasets' / 'chat'}; "
        "1 train task, 0 validation tasks; reference-agent 1.0.0: 1 graded, 1 kept; "
        "8 duplicate turns trained once (1 row left out)"
    ]
    assert err == ""


def test_a_folder_split_counts_folders(source: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With `--split-by folder` the summary counts save folders on each side."""
    write_run(source / "a", config=run_config("run-a"))
    write_run(source / "b", config=run_config("run-b"))
    assert _run(source, split_by="folder", validation_ratio=0.5, dedupe=False) == 0
    assert capsys.readouterr().out == (
        f"exported 10 rows (chat: 10) from 2 saves to {source / 'datasets' / 'chat'}; "
        "1 train folder, 1 validation folder; reference-agent 1.0.0: 2 graded, 2 kept\n"
    )


def test_a_folder_split_with_ratio_zero_is_refused(
    source: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 2, nothing written, and the message names MAGMA-GEN's rule."""
    write_run(source / "a")
    assert _run(source, split_by="folder", validation_ratio=0.0) == 2
    assert capsys.readouterr().err == (
        "error: with --split-by folder the validation ratio must be strictly between 0 and 1, "
        "as MAGMA-GEN requires; got 0.0\n"
    )
    assert not (source / "datasets").exists()


def test_a_reused_export_says_so(source: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With `--skip-pre-made` and nothing changed, the command says it reused the export."""
    write_run(source / "run")
    _run(source)
    capsys.readouterr()
    assert _run(source, skip_pre_made=True) == 0
    assert capsys.readouterr().out == (
        f"reused the complete export in {source / 'datasets' / 'chat'} "
        "(4 rows; sources, settings and file hashes unchanged)\n"
    )


def test_a_symlinked_config_is_skipped_with_its_reason(
    source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A save whose config.json is a symlink is skipped; the other saves still export."""
    write_run(source / "good")
    real = write_run(tmp_path / "elsewhere")
    (source / "linked").mkdir()
    (source / "linked" / "config.json").symlink_to(real / "config.json")
    with pytest.raises(SaveError) as refused:
        read_config(source / "linked")
    assert _run(source) == 0
    out, err = capsys.readouterr()
    config = (source / "linked" / "config.json").absolute()
    assert _lines(err) == [f"skipped {config}: {refused.value.reason}"]
    assert refused.value.reason in (
        "resolves outside the save folder",
        "is a symlink; saves must hold regular files only",
    )
    assert "; 1 save skipped;" in out


def test_an_incomplete_save_is_skipped_with_its_reason(
    source: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A save still being written (export_complete false) is named and skipped."""
    write_run(source / "done")
    folder = source / "half"
    write_save(folder, run_config("run-2"), coached_run())
    config = json.loads((folder / "config.json").read_text())
    config["export_complete"] = False
    (folder / "config.json").write_text(json.dumps(config))
    assert _run(source) == 0
    assert _lines(capsys.readouterr().err) == [
        f"skipped {folder / 'config.json'}: incomplete save (export_complete is false): "
        "still being written, or interrupted"
    ]


def test_a_broken_situation_file_skips_its_save(
    source: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A save whose situation file is missing is skipped when read, on one line."""
    write_run(source / "done")
    write_run(source / "broken")
    (source / "broken" / "3.json").unlink()
    assert _run(source) == 0
    assert _lines(capsys.readouterr().err) == [
        f"skipped {source / 'broken' / '3.json'}: is missing"
    ]


def test_an_incompatible_producer_is_a_failure(
    source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A save from an agent the format does not accept is refused, listed, and exits 1."""
    write_run(source / "new", config=run_config("run-new", agent_version="2.0.0"))
    write_run(source / "old", config=run_config("run-old", agent_version="1.0.0"))
    options = tmp_path / "options.json"
    accepted = {"agent_id": "reference-agent", "agent_version": "2.0.0"}
    options.write_text(json.dumps({"agents": [accepted]}))
    assert _run(source, options=options) == 1
    out, err = capsys.readouterr()
    reason = (
        "incompatible producer identity/version: agent reference-agent 1.0.0; this export "
        "accepts reference-agent 2.0.0 (accept it with --from reference-agent@1.0.0 or the "
        "option 'agents')"
    )
    failures = source / "datasets" / "chat" / "export_failures.json"
    assert _lines(err) == [f"refused old: {reason}", f"1 failure: see {failures}"]
    assert out.startswith("exported 4 rows (chat: 4) from 1 save")
    assert json.loads(failures.read_text()) == [{"source": "old", "example": None, "error": reason}]


def test_no_save_at_all_is_an_error(source: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An empty source exits 2 with the reason and writes nothing."""
    assert _run(source) == 2
    assert capsys.readouterr().err == f"error: no save under {source}: no config.json found\n"
    assert not (source / "datasets" / "chat").exists()


def test_no_usable_save_is_an_error(source: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Saves that are all unreadable exit 2, after naming each one."""
    (source / "run").mkdir()
    (source / "run" / "config.json").write_text("{not json")
    assert _run(source) == 2
    err = _lines(capsys.readouterr().err)
    assert len(err) == 2
    assert err[0].startswith(f"skipped {source / 'run' / 'config.json'}: invalid RunConfig: ")
    assert err[1] == (
        f"error: no usable save under {source}: 1 found, 1 skipped (unreadable or incomplete)"
    )
    assert not (source / "datasets" / "chat").exists()


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("[1, 2]", "must hold a JSON object, not an array"),
        ('"per_turn"', "must hold a JSON object, not a string"),
        (
            "{per_turn: true}",
            "is not valid JSON: Expecting property name enclosed in double quotes",
        ),
    ],
)
def test_an_options_file_must_be_a_json_object(
    source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, reason: str
) -> None:
    """An options file that is not a JSON object stops the export before any work."""
    write_run(source / "run")
    options = tmp_path / "options.json"
    options.write_text(content)
    assert _run(source, options=options) == 2
    assert capsys.readouterr().err.startswith(f"error: options file {options} {reason}")
    assert not (source / "datasets" / "chat").exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"per_trun": True},
            "unknown option 'per_trun' for format 'chat'; known options: "
            "as, best_of, dedupe, exclude_fallbacks, flavour, min_score, per_turn, reasoning, "
            "shape, system_prompt, tool_failures",
        ),
        (
            {"best_of": 0},
            "option 'best_of' of format 'chat' must be an integer of at least 1, got 0",
        ),
        (
            {"per_turn": "yes"},
            "option 'per_turn' of format 'chat' must be true or false, got \"yes\"",
        ),
        ({"agents": "me"}, "option 'agents' must be a list of"),
    ],
)
def test_bad_option_values_are_named(
    source: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    options: dict[str, object],
    message: str,
) -> None:
    """Each refused option is named with what it must be and what it was."""
    write_run(source / "run")
    path = tmp_path / "options.json"
    path.write_text(json.dumps(options))
    assert _run(source, options=path) == 2
    assert capsys.readouterr().err.startswith(f"error: {message}")


def test_an_unknown_format_lists_the_installed_ones(
    source: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A format name nobody installed exits 2 with the names that are installed."""
    write_run(source / "run")
    assert _run(source, fmt="csv") == 2
    assert capsys.readouterr().err == (
        "error: unknown format 'csv'; installed formats: chat, full-history, preference\n"
    )


@pytest.mark.parametrize("ratio", [-0.1, 1.0, 1.5])
def test_a_validation_ratio_outside_0_to_1_is_refused(
    source: Path, capsys: pytest.CaptureFixture[str], ratio: float
) -> None:
    """The ratio must be at least 0 and below 1."""
    write_run(source / "run")
    assert _run(source, validation_ratio=ratio) == 2
    assert capsys.readouterr().err == (
        f"error: the validation ratio must be at least 0 and below 1, got {ratio}\n"
    )


def test_a_source_that_is_not_a_folder_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing source exits 2 naming it."""
    assert _run(tmp_path / "nowhere") == 2
    assert capsys.readouterr().err == f"error: source {tmp_path / 'nowhere'} is not a folder\n"


class _Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_a_progress_bar_and_the_messages_above_it(
    source: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a TTY the saves are tracked by a bar; skip messages still reach the person."""
    write_run(source / "run")
    (source / "empty").mkdir()
    (source / "empty" / "config.json").write_text("[]")
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert _run(source) == 0
    shown = terminal.getvalue()
    assert "exporting saves" in shown
    assert f"skipped {source / 'empty' / 'config.json'}: invalid RunConfig" in shown


def test_no_progress_bar_when_not_asked(source: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`progress=False` keeps a terminal free of the bar."""
    write_run(source / "run")
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert _run(source, progress=False) == 0
    assert terminal.getvalue() == ""
