"""The manifest, its hashes, atomic symlink-free writes, and `--skip-pre-made` reuse."""

from __future__ import annotations

import json
from hashlib import sha256
from pathlib import Path

import pytest

from gencoach.__about__ import __version__
from gencoach.export import ExportError
from gencoach.export.splits import Partition, Task
from gencoach.export.writer import DatasetWriter
from tests.support.exports import Export
from tests.support.saved_runs import run_config, write_run


def _manifest(source: Path) -> dict[str, object]:
    value: dict[str, object] = json.loads(
        (source / "datasets" / "chat" / "export_manifest.json").read_text()
    )
    return value


@pytest.fixture
def two_tasks(source: Path) -> Path:
    """Two saves of two tasks below `source`."""
    write_run(source / "runs" / "a", config=run_config("run-a", target="first"))
    write_run(source / "runs" / "b", config=run_config("run-b", target="second"))
    return source


def test_the_manifest_records_producer_settings_rows_split_and_hashes(
    export: Export, two_tasks: Path
) -> None:
    """Every written file is listed with the SHA-256 of its bytes; no failure means complete."""
    export("chat", dedupe=False, options={"min_score": 0.3}, validation_ratio=0.5, split_seed=1)
    manifest = _manifest(two_tasks)
    folder = two_tasks / "datasets" / "chat"
    assert manifest["producer"] == {"package": "gencoach", "version": __version__}
    assert manifest["complete"] is True
    assert manifest["settings"] == {
        "format": "chat",
        "exporter_version": __version__,
        "options": {"min_score": 0.3, "dedupe": False},
        "filters": {"cases": None, "since": None, "limit": None},
        "producers": ["reference-agent 1.0.0"],
        "validation_ratio": 0.5,
        "split_by": "task",
        "split_seed": 1,
        "shuffle_seed": 42,
        "producer": {"package": "gencoach", "version": __version__},
    }
    assert manifest["rows"] == {"chat": 10}
    assert manifest["saves"] == 2
    split = manifest["split"]
    assert isinstance(split, dict)
    assert sorted(split["train"] + split["validation"], key=str) == [
        {"scenario": "buttons", "target": "first"},
        {"scenario": "buttons", "target": "second"},
    ]
    assert len(split["validation"]) == 1
    files = manifest["files"]
    assert isinstance(files, dict)
    written = {path.name for path in folder.iterdir()} - {"export_manifest.json"}
    assert (
        set(files)
        == written
        == {
            "chat.jsonl",
            "chat_train.jsonl",
            "chat_validation.jsonl",
            "export_failures.json",
        }
    )
    for name, digest in files.items():
        assert sha256((folder / name).read_bytes()).hexdigest() == digest
    assert json.loads((folder / "export_failures.json").read_text()) == []
    assert len(str(manifest["signature"])) == 64


def test_skip_pre_made_reuses_an_intact_export(export: Export, two_tasks: Path) -> None:
    """Same sources and settings, files intact: nothing is rewritten."""
    export("chat", dedupe=False)
    before = {p.name: p.stat().st_mtime_ns for p in (two_tasks / "datasets" / "chat").iterdir()}
    outcome = export("chat", dedupe=False, skip_pre_made=True)
    after = {p.name: p.stat().st_mtime_ns for p in (two_tasks / "datasets" / "chat").iterdir()}
    assert outcome.reused
    assert outcome.rows == {"chat": 10}
    assert after == before


def _flip_one_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    index = data.index(b"sw4")
    data[index + 2] = ord("5")
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "changed",
    [
        "runs/a/1.json",
        "runs/b/config.json",
        "datasets/chat/chat_train.jsonl",
        "datasets/chat/chat.jsonl",
    ],
)
def test_one_changed_byte_in_a_source_or_output_redoes_the_export(
    export: Export, two_tasks: Path, changed: str
) -> None:
    """A byte changed in a situation, a config or an output file makes the export run again."""
    export("chat", dedupe=False)
    original = (two_tasks / "datasets" / "chat" / "chat.jsonl").read_bytes()
    signature = _manifest(two_tasks)["signature"]
    _flip_one_byte(two_tasks / changed)
    outcome = export("chat", dedupe=False, skip_pre_made=True)
    assert not outcome.reused
    if changed.startswith("datasets/chat/"):
        assert (two_tasks / "datasets" / "chat" / "chat.jsonl").read_bytes() == original
        assert _manifest(two_tasks)["signature"] == signature
    else:
        assert _manifest(two_tasks)["signature"] != signature


def test_other_settings_redo_the_export(export: Export, two_tasks: Path) -> None:
    """A different seed is a different export, even with `--skip-pre-made`."""
    export("chat", dedupe=False)
    assert not export("chat", shuffle_seed=7, skip_pre_made=True).reused
    assert not export("chat", shuffle_seed=7, options={"per_turn": True}, skip_pre_made=True).reused


def test_a_missing_output_file_redoes_the_export(export: Export, two_tasks: Path) -> None:
    """A deleted dataset file fails the check and is written again."""
    export("chat", dedupe=False)
    (two_tasks / "datasets" / "chat" / "chat_validation.jsonl").unlink()
    assert not export("chat", skip_pre_made=True).reused
    assert (two_tasks / "datasets" / "chat" / "chat_validation.jsonl").is_file()


def test_an_incomplete_export_is_never_reused(export: Export, two_tasks: Path) -> None:
    """A manifest that says incomplete is redone, signature and hashes notwithstanding."""
    export("chat", dedupe=False)
    manifest = _manifest(two_tasks)
    manifest["complete"] = False
    (two_tasks / "datasets" / "chat" / "export_manifest.json").write_text(json.dumps(manifest))
    assert not export("chat", skip_pre_made=True).reused
    assert _manifest(two_tasks)["complete"] is True


def test_an_export_with_failures_is_redone_every_time(export: Export, two_tasks: Path) -> None:
    """A refused producer is a failure: the export is incomplete and never reused."""
    write_run(two_tasks / "runs" / "c", config=run_config("run-c", agent_version="0.9"))
    only_1_0 = {"agents": [{"agent_id": "reference-agent", "agent_version": "1.0.0"}]}
    assert not export("chat", options=only_1_0).complete
    assert _manifest(two_tasks)["complete"] is False
    assert not export("chat", options=only_1_0, skip_pre_made=True).reused


def test_outputs_are_never_written_through_a_symlink(
    export: Export, two_tasks: Path, tmp_path: Path
) -> None:
    """A symlink where a dataset file goes stops the export; its target is untouched."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    folder = two_tasks / "datasets" / "chat"
    folder.mkdir(parents=True)
    (folder / "chat_train.jsonl").symlink_to(victim)
    with pytest.raises(ExportError, match="refusing to write through a symlink"):
        export("chat", dedupe=False)
    assert victim.read_text() == "keep me"
    assert sorted(path.name for path in folder.iterdir()) == ["chat_train.jsonl"]


def test_a_failure_while_staging_leaves_no_temporary_file(tmp_path: Path) -> None:
    """When writing the split files fails, `abort` removes every temporary file (the spool
    being read included): the destination folder is left empty."""
    writer = DatasetWriter(tmp_path / "out", {"chat": "chat.jsonl"})
    task = Task("scenario", "target")
    writer.add("chat", task, {"messages": []})

    def broken(line: bytes) -> bytes:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        writer.stage(Partition((task,), ()), broken)
    writer.abort()
    assert list((tmp_path / "out").iterdir()) == []


def test_a_symlinked_destination_is_refused(
    export: Export, two_tasks: Path, tmp_path: Path
) -> None:
    """The format's destination folder may not be a symlink to elsewhere."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (two_tasks / "datasets").mkdir()
    (two_tasks / "datasets" / "chat").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(ExportError, match="refusing to write through a symlink"):
        export("chat", dedupe=False)
    assert list(elsewhere.iterdir()) == []


def test_out_chooses_the_destination(export: Export, two_tasks: Path, tmp_path: Path) -> None:
    """`--out` writes there and leaves the source without a `datasets` folder."""
    outcome = export("full-history", out=tmp_path / "elsewhere")
    assert outcome.destination == tmp_path / "elsewhere"
    assert (tmp_path / "elsewhere" / "hr_data.json").is_file()
    assert not (two_tasks / "datasets").exists()


def test_no_temporary_file_is_left_behind(export: Export, two_tasks: Path) -> None:
    """Spools and staged files are all moved or removed."""
    export("full-history")
    export("chat", dedupe=False)
    names = sorted(path.name for path in (two_tasks / "datasets" / "chat").iterdir())
    assert not [name for name in names if name.startswith(".")]
