"""`--tool-failures`: the tools' own failure predicates make decisions untrainable in the
library exactly as in the chat export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gencoach.cli import app
from gencoach.export import ExportSettings, run_export
from gencoach.export.tool_failures import NO_PREDICATES, ToolFailures
from gencoach.library import CanonicalDatasetAdapter
from gencoach.library.build import build_library
from gencoach.library.declarations import read_tool_failures
from gencoach.library.errors import LibraryError
from tests.library.sources import coached_save, magma_save, trajectories
from tests.support.saved_runs import (
    FEEDBACK,
    candidate,
    executed,
    press,
    situation,
    stage,
    write_run,
)

runner = CliRunner()
OK = {"stage_0": stage(1, 0, 0, 1)}


def _rejected_save(folder: Path) -> Path:
    """c0's press ran without an executor error, but the simulator rejected its input."""
    result = executed("sw9")
    result["panda"]["failure_reason"] = "rejected: sw9 is not a button"
    first = candidate(0, press("sw9"), "ongoing", OK, links=[(1, "next")], execution=result)
    second = candidate(1, press("sw4"), "optimal", OK, execution=executed("sw4"))
    return write_run(
        folder,
        [situation(0, None, [first]), situation(1, 0, [second], content=FEEDBACK, kind="env")],
    )


def _marks(library: Path) -> dict[int, bool]:
    """Each decision's `trainable` in the library, by candidate id."""
    with CanonicalDatasetAdapter(library) as lib:
        return {
            decision["step"]["candidate_id"]: decision["trainable"]
            for record in trajectories(lib)
            for decision in record.decisions
        }


def _build(tmp_path: Path, save: Path, *options: str) -> Path:
    library = tmp_path / "lib"
    built = runner.invoke(app, ["library", "build", str(save), "-o", str(library), *options])
    assert built.exit_code == 0, built.output
    return library


def _declare(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("failures.yaml", 'press_button: "^rejected"\n'),
        ("failures.json", json.dumps({"press_button": {"pattern": "not a button$"}})),
        ("hook.yaml", "press_button: {callable: 'tests.export.hooks:rejected'}\n"),
    ],
)
def test_a_recognised_failed_call_is_not_trainable(tmp_path: Path, name: str, text: str) -> None:
    """Without a file c0 is trainable; with a predicate recognising its result, it is not."""
    save = _rejected_save(tmp_path / "run")
    assert _marks(_build(tmp_path / "plain", save)) == {0: True, 1: True}
    declared = _declare(tmp_path / name, text)
    assert _marks(_build(tmp_path, save, "--tool-failures", str(declared))) == {0: False, 1: True}


def test_magma_gen_step_summary_messages_are_read(tmp_path: Path) -> None:
    """A predicate matches a MAGMA-GEN `per_robot_status` entry's `mess`; a `bad_call`
    flag in the by-robot shape stays a failure either way."""
    save = magma_save(tmp_path / "magma-1")
    declared = _declare(tmp_path / "failures.yaml", "press_button: ^pressed$\n")
    assert _marks(_build(tmp_path / "plain", save)) == {0: True, 1: False}
    assert _marks(_build(tmp_path, save, "--tool-failures", str(declared))) == {0: False, 1: False}


@pytest.mark.parametrize("failures", [NO_PREDICATES, ToolFailures.parse({"press_button": "^rej"})])
def test_the_library_agrees_with_the_chat_export(tmp_path: Path, failures: ToolFailures) -> None:
    """The chat export's per-turn rows end only at the library's trainable decisions, and
    at every one of them where its selection keeps every answer (the rejected save)."""
    source = tmp_path / "output"
    _rejected_save(source / "run")
    coached_save(source / "coached", run_id="coached")
    build_library([source], tmp_path / "lib", "r1", failures=failures)
    settings = ExportSettings(
        source=source, format="chat", options={"per_turn": True}, tool_failures=failures
    )
    run_export(settings)
    rows = (source / "datasets" / "chat" / "chat.jsonl").read_text(encoding="utf-8").splitlines()
    exported = {(row["run_id"], row["candidate_id"]) for row in map(json.loads, rows)}
    with CanonicalDatasetAdapter(tmp_path / "lib") as lib:
        trainable = {
            (record.locator["run_id"], decision["step"]["candidate_id"])
            for record in trajectories(lib)
            for decision in record.decisions
            if decision["trainable"]
        }
    assert exported <= trainable
    assert {key for key in exported if key[0] == "run-1"} == {
        key for key in trainable if key[0] == "run-1"
    }
    assert (("run-1", 0) in trainable) is (failures is NO_PREDICATES)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            'press_button: "(a)\\\\1"\n',
            "failure pattern of tool 'press_button' '(a)\\\\1' is not a linear-time (RE2) "
            "regular expression: invalid escape sequence: \\1",
        ),
        (
            "press_button: {regex: x}\n",
            'a tool failures file must be an object of tool name → "pattern", '
            '{"pattern": str} or {"callable": "module:function"}; got {\'regex\': \'x\'} '
            "for 'press_button'",
        ),
        (
            "press_button: {callable: 'tests.export.hooks:absent'}\n",
            "failure predicate of 'press_button' 'tests.export.hooks:absent': module "
            "'tests.export.hooks' has no attribute 'absent'",
        ),
        ("[press_button", "cannot be read as a tool failures file: "),
    ],
)
def test_a_bad_tool_failures_file_is_refused(tmp_path: Path, text: str, reason: str) -> None:
    """The file and the tool are named, the exit code is 2 and no library is written."""
    save = _rejected_save(tmp_path / "run")
    declared = _declare(tmp_path / "failures.yaml", text)
    with pytest.raises(LibraryError) as caught:
        read_tool_failures(declared)
    assert caught.value.reason.startswith(reason)
    for command in (
        ["build", str(save), "-o", str(tmp_path / "lib")],
        ["append", "--base", str(tmp_path / "lib"), "-i", str(save), "-o", str(tmp_path / "lib2"),
         "--release", "2"],
    ):  # fmt: skip
        result = runner.invoke(app, ["library", *command, "--tool-failures", str(declared)])
        assert result.exit_code == 2
        assert result.stderr.startswith(f"error: {declared}: {reason}")
        assert not (tmp_path / "lib").exists()
        assert not (tmp_path / "lib2").exists()


def test_a_missing_tool_failures_file_is_named(tmp_path: Path) -> None:
    """A file that cannot be read stops the build before anything is written."""
    save = _rejected_save(tmp_path / "run")
    missing = tmp_path / "absent.yaml"
    result = runner.invoke(
        app, ["library", "build", str(save), "-o", str(tmp_path / "lib"), "--tool-failures",
              str(missing)]
    )  # fmt: skip
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {missing}: cannot be read as a tool failures file")
    assert not (tmp_path / "lib").exists()


def test_append_reads_new_saves_with_the_predicates(tmp_path: Path) -> None:
    """An append given the file marks the new save's recognised failure untrainable."""
    build_library([coached_save(tmp_path / "coached")], tmp_path / "base", "r1")
    save = _rejected_save(tmp_path / "run")
    declared = _declare(tmp_path / "failures.yaml", 'press_button: "^rejected"\n')
    result = runner.invoke(
        app, ["library", "append", "--base", str(tmp_path / "base"), "-i", str(save), "-o",
              str(tmp_path / "lib"), "--release", "2", "--tool-failures", str(declared)]
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    with CanonicalDatasetAdapter(tmp_path / "lib") as lib:
        marks = [
            decision["trainable"]
            for record in trajectories(lib)
            if record.locator["save"] == "run"
            for decision in record.decisions
        ]
    assert marks == [False, True]


def test_an_overlay_written_with_the_same_predicates_joins_the_index(tmp_path: Path) -> None:
    """`canonical --tool-failures` writes the records a metadata-only build with the same
    file indexed, so the overlay supplies their content with c0 untrainable."""
    save = _rejected_save(tmp_path / "run")
    declared = _declare(tmp_path / "failures.yaml", 'press_button: "^rejected"\n')
    flag = ["--tool-failures", str(declared)]
    lib, overlay = tmp_path / "lib", tmp_path / "overlay.jsonl"
    built = runner.invoke(app, ["library", "build", "--metadata-only", str(save), "-o", str(lib),
                                *flag])  # fmt: skip
    assert built.exit_code == 0, built.output
    written = runner.invoke(app, ["library", "canonical", str(save), "-o", str(overlay), *flag])
    assert written.exit_code == 0, written.output
    with CanonicalDatasetAdapter(lib, content_overlays={"save:run-1": overlay}) as joined:
        (record,) = trajectories(joined)
        assert joined.content_availability("save:run-1") == "overlay"
    assert [decision["trainable"] for decision in record.decisions] == [False, True]
