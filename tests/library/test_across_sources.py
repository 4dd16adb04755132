"""One task across sources, permissions given at build time, and reading that writes nothing."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gencoach.cli import app
from gencoach.export import ExportSettings, run_export
from gencoach.library import CanonicalDatasetAdapter, DatasetQuery, LibraryError
from gencoach.library.build import build_library, write_canonical
from tests.library.sources import chat_row, coached_save, write_chat

runner = CliRunner()


def test_a_task_has_one_split_whether_read_from_its_save_or_its_chat_rows(
    tmp_path: Path,
) -> None:
    """The demo task imported from its save and from the chat.jsonl exported from that
    save gets one task key, so one split, in every seed's library."""
    coached_save(tmp_path / "saves" / "run-1")
    run_export(ExportSettings(source=tmp_path / "saves", format="chat", out=tmp_path / "out"))
    chat = tmp_path / "out" / "chat.jsonl"
    for seed in range(8):
        build_library([tmp_path / "saves", chat], tmp_path / f"lib-{seed}", "r1", split_seed=seed)
        with CanonicalDatasetAdapter(tmp_path / f"lib-{seed}") as lib:
            rows = lib.select()
            kinds = {row.source_id.split(":")[0] for row in rows}
            assert kinds == {"save", "chat"}
            assert len({row.task_key for row in rows}) == 1
            assert len({row.split for row in rows}) == 1


def test_a_task_has_one_benchmark_and_environment_from_its_save_and_its_chat_rows(
    tmp_path: Path,
) -> None:
    """A save and its own chat export name the same benchmark and environment: a query
    for the save's benchmark finds both sources' records, ranked in one group."""
    coached_save(tmp_path / "saves" / "run-1")
    run_export(ExportSettings(source=tmp_path / "saves", format="chat", out=tmp_path / "out"))
    build_library([tmp_path / "saves", tmp_path / "out" / "chat.jsonl"], tmp_path / "lib", "r1")
    with CanonicalDatasetAdapter(tmp_path / "lib") as lib:
        rows = lib.select(DatasetQuery(benchmarks=("gencoach/buttons",)))
        assert {row.source_id.split(":")[0] for row in rows} == {"save", "chat"}
        assert len(rows) == len(lib.select())
        assert {row.environment_key for row in rows} == {"gencoach@0.1.0/buttons@unversioned"}
        assert sorted(row.quality_rank for row in rows) == list(range(1, len(rows) + 1))


def test_no_task_leaks_across_splits_whatever_its_sources(tmp_path: Path) -> None:
    """Saves, their chat export, ShareGPT and TRL files: every task is in one split, and
    each split's tasks are disjoint from every other's."""
    coached_save(tmp_path / "saves" / "run-1")
    coached_save(tmp_path / "saves" / "run-2", "run-2", "sw1-sw2")
    run_export(ExportSettings(source=tmp_path / "saves", format="chat", out=tmp_path / "out"))
    fixtures = Path(__file__).parent / "fixtures"
    sources = [tmp_path / "saves", tmp_path / "out" / "chat.jsonl",
               fixtures / "sharegpt.jsonl", fixtures / "trl_prompt_completion.jsonl"]  # fmt: skip
    build_library(sources, tmp_path / "lib", "r1")
    with CanonicalDatasetAdapter(tmp_path / "lib") as lib:
        splits: dict[str, set[str]] = {}
        for row in lib.metadata():
            splits.setdefault(row.task_key, set()).add(row.split)
        assert all(len(found) == 1 for found in splits.values())
        by_split: dict[str, set[str]] = {}
        for task, (split,) in splits.items():
            by_split.setdefault(split, set()).add(task)
        names = sorted(by_split)
        for index, left in enumerate(names):
            for right in names[index + 1 :]:
                assert not by_split[left] & by_split[right]
        for row in lib.select(DatasetQuery.for_training()):
            assert row.split != "protected_evaluation"


def _snapshot(folder: Path) -> dict[str, tuple[str, float]]:
    return {
        path.relative_to(folder).as_posix(): (
            hashlib.sha256(path.read_bytes()).hexdigest(),
            path.stat().st_mtime,
        )
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def test_reading_never_writes_the_library(saves: Path, tmp_path: Path) -> None:
    """Every consumer call, with an overlay and a written query, leaves the library's
    files (names, bytes and times) as they were."""
    extra = write_chat(tmp_path / "extra.jsonl", [chat_row("done")])
    lib_path = tmp_path / "lib"
    build_library([saves], lib_path, "r1", metadata_only=[extra])
    overlay = tmp_path / "overlay.jsonl"
    write_canonical([extra], overlay)
    before = _snapshot(lib_path)
    with CanonicalDatasetAdapter(lib_path, content_overlays={"chat:extra.jsonl": overlay}) as lib:
        rows = lib.select()
        list(lib.iter_records())
        list(lib.iter_examples(view="turn"))
        lib.get_trajectory(rows[0].contributing_trajectory_ids[0])
        lib.evaluation_bundle(rows[0].task_key)
        lib.alternatives(rows[0].task_key)
        lib.available_sources()
        lib.permissions("chat:extra.jsonl")
        lib.content_sources()
    query = ["library", "query", str(lib_path), "--availability", "hosted"]
    result = runner.invoke(app, [*query, "-o", str(tmp_path / "q")])
    assert result.exit_code == 0, result.output
    assert _snapshot(lib_path) == before


def test_query_output_writes_chat_rows_the_library_reads_back(saves: Path, tmp_path: Path) -> None:
    """`query --output` writes chat rows (or the view's dicts); the chat rows build a
    library with the same targets, in the same task splits; the library itself is refused."""
    lib_path = tmp_path / "lib"
    build_library([saves], lib_path, "r1")
    chat, turns = tmp_path / "chat.jsonl", tmp_path / "turns.jsonl"
    result = runner.invoke(
        app, ["library", "query", str(lib_path), "--selection", "best", "--output", str(chat)]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == f"wrote 5 chat examples of 5 trajectories to {chat}\n"
    rows = [json.loads(line) for line in chat.read_text().splitlines()]
    assert all({"messages", "tools", "metadata"} <= set(row) for row in rows)
    turned = runner.invoke(
        app, ["library", "query", str(lib_path), "-o", str(turns), "--format", "turn"]
    )
    assert turned.exit_code == 0, turned.output
    first = json.loads(turns.read_text().splitlines()[0])
    assert first["target_event_id"] == first["metadata"]["lineage"]["turn_id"]
    build_library([chat], tmp_path / "again", "r2")
    with (
        CanonicalDatasetAdapter(lib_path) as lib,
        CanonicalDatasetAdapter(tmp_path / "again") as again,
    ):
        best = lib.select(DatasetQuery(selection="best"))
        read_back = again.select()
        assert {r.task_key: r.split for r in best} == {r.task_key: r.split for r in read_back}
        assert sorted(r.targets for r in best) == sorted(r.targets for r in read_back)
    inside = runner.invoke(app, ["library", "query", str(lib_path), "-o", str(lib_path / "x")])
    assert inside.exit_code == 2
    assert "is inside the library, which is never written" in inside.stderr


def test_a_bad_permissions_file_is_refused_with_the_field(saves: Path, tmp_path: Path) -> None:
    """A permission value outside the vocabulary names the source key and the choices."""
    audit = tmp_path / "permissions.json"
    audit.write_text(json.dumps({"sources": {"save:*": {"model_training": "yes"}}}))
    with pytest.raises(LibraryError) as caught:
        build_library([saves], tmp_path / "lib", "r1", permissions=audit)
    assert caught.value.reason == (
        "sources.save:*.model_training is 'yes'; one of: permitted, conditional, prohibited, "
        "unknown"
    )
    assert not (tmp_path / "lib").exists()


DOCS = Path(__file__).resolve().parents[2] / "docs" / "library.md"


def _docs_permissions_block() -> str:
    """The permissions example of docs/library.md, as written there."""
    text = DOCS.read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", text, re.DOTALL) if "sources:" in b]
    return block


def test_the_documented_permissions_example_loads_as_written(saves: Path, tmp_path: Path) -> None:
    """docs/library.md's permissions file, copied as it stands, audits the saves with
    every value it shows, its audit date included (not turned into a boolean key)."""
    audit = tmp_path / "permissions.yaml"
    audit.write_text(_docs_permissions_block(), encoding="utf-8")
    build_library([saves], tmp_path / "lib", "r1", permissions=audit)
    with CanonicalDatasetAdapter(tmp_path / "lib") as lib:
        rights = lib.permissions("save:run-1")
    assert rights.dimensions == {
        "research": "permitted",
        "model_training": "permitted",
        "commercial_training": "conditional",
        "transformed_redistribution": "prohibited",
    }
    assert rights.conditions == ("attribute the generating team",)
    assert rights.audit == {"by": "data-governance", "on": "2026-11-30"}


def test_an_unquoted_yaml_on_in_an_audit_is_refused_with_the_fix(
    saves: Path, tmp_path: Path
) -> None:
    """`on:` unquoted is YAML 1.1's boolean true: the audit is refused, naming the key and
    the fix, instead of storing `{"true": ...}`."""
    audit = tmp_path / "permissions.yaml"
    audit.write_text('sources:\n  "save:*":\n    audit: {by: me, on: 2026-11-30}\n')
    with pytest.raises(LibraryError, match=r"audit has the key True, not a string.*\(\"on\"\)"):
        build_library([saves], tmp_path / "lib", "r1", permissions=audit)
    assert not (tmp_path / "lib").exists()


def test_a_hosted_copy_of_a_metadata_only_record_is_hosted(tmp_path: Path) -> None:
    """The same content indexed metadata-only and later from a hosted source is readable."""
    unhosted = write_chat(tmp_path / "a.jsonl", [chat_row("done")])
    hosted = write_chat(tmp_path / "b.jsonl", [chat_row("done")])
    build_library([hosted], tmp_path / "lib", "r1", metadata_only=[unhosted])
    with CanonicalDatasetAdapter(tmp_path / "lib") as lib:
        (row,) = lib.select()
        assert row.content_availability == "hosted"
        assert len(row.contributing_trajectory_ids) == 2
        assert lib.content_availability("chat:a.jsonl") == "metadata_only"
