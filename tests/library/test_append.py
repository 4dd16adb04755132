"""Appending: the base is read once, never rewritten, and the result equals a rebuild."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gencoach.library import CanonicalDatasetAdapter, DatasetQuery, LibraryError, SamplingConfig
from gencoach.library.build import append_library, build_library, write_canonical
from gencoach.library.manifest import file_sha256
from tests.library.sources import coached_save, human_save, magma_config, magma_save
from tests.support.saved_runs import candidate, say, situation, write_run


@pytest.fixture
def campaigns(tmp_path: Path) -> tuple[Path, Path]:
    """Two campaigns: the second adds a task and new attempts of an existing one."""
    first, second = tmp_path / "first", tmp_path / "second"
    coached_save(first / "run-1", "run-1", "sw0-sw4")
    magma_save(first / "magma-1")
    coached_save(second / "run-2", "run-2", "sw1-sw2")
    human_save(second / "human-1")
    magma_save(second / "magma-2", "magma-2", "sw8")
    return first, second


def _facts(path: Path) -> list[tuple[object, ...]]:
    with CanonicalDatasetAdapter(path) as lib:
        return [(r.trajectory_id, r.quality_rank, r.task_rank, r.split) for r in lib.select()]


def test_append_equals_a_rebuild(campaigns: tuple[Path, Path], tmp_path: Path) -> None:
    """Base + append gives the same rows, ranks, splits and samples as building both at once."""
    first, second = campaigns
    build_library([first], tmp_path / "base", "r1")
    append_library(tmp_path / "base", [second], tmp_path / "grown", "r2")
    build_library([first, second], tmp_path / "rebuilt", "r1")
    assert _facts(tmp_path / "grown") == _facts(tmp_path / "rebuilt")
    sampling = SamplingConfig(6, 3, "source_balanced")
    with (
        CanonicalDatasetAdapter(tmp_path / "grown") as grown,
        CanonicalDatasetAdapter(tmp_path / "rebuilt") as rebuilt,
    ):
        query = DatasetQuery(selection="successful")
        assert [r.trajectory_id for r in grown.metadata(query, sampling)] == [
            r.trajectory_id for r in rebuilt.metadata(query, sampling)
        ]
        assert [e.sample_id for e in grown.iter_examples(view="turn")] == [
            e.sample_id for e in rebuilt.iter_examples(view="turn")
        ]


def test_append_never_rewrites_the_base(campaigns: tuple[Path, Path], tmp_path: Path) -> None:
    """The base folder is untouched and its shards are carried over byte for byte."""
    first, second = campaigns
    build_library([first], tmp_path / "base", "r1")
    before = {p.name: file_sha256(p) for p in (tmp_path / "base").rglob("*") if p.is_file()}
    append_library(tmp_path / "base", [second], tmp_path / "grown", "r2")
    after = {p.name: file_sha256(p) for p in (tmp_path / "base").rglob("*") if p.is_file()}
    assert after == before
    grown = json.loads((tmp_path / "grown" / "manifest.json").read_text())
    base = json.loads((tmp_path / "base" / "manifest.json").read_text())
    assert grown["shards"][: len(base["shards"])] == base["shards"]
    assert len(grown["shards"]) == len(base["shards"]) + 1
    assert grown["releases"] == ["r1", "r2"]


def test_append_report(campaigns: tuple[Path, Path], tmp_path: Path) -> None:
    """The report names the base manifest's hash, counts, the affected tasks only, and
    says the base's scores and shards were not reprocessed (its shards are the base's
    bytes)."""
    first, second = campaigns
    build_library([first], tmp_path / "base", "r1")
    coached_save(second / "copy-of-run-1", "run-1-again", "sw0-sw4")  # duplicates the base
    append_library(tmp_path / "base", [second, first], tmp_path / "grown", "r2")
    report = json.loads((tmp_path / "grown" / "append_report.json").read_text())
    base_shards = sorted((tmp_path / "base" / "shards").iterdir())
    assert report["base"] == {
        "release": "r1",
        "manifest_sha256": file_sha256(tmp_path / "base" / "manifest.json"),
        "scores_reprocessed": False,
        "shards_reprocessed": False,
        "shards": len(base_shards),
    }
    for shard in base_shards:
        assert file_sha256(tmp_path / "grown" / "shards" / shard.name) == file_sha256(shard)
    assert report["accepted"] == 5 + 2 + 2
    assert report["duplicates"] == 5
    assert report["already_present"] == ["first/magma-1", "first/run-1"]
    with CanonicalDatasetAdapter(tmp_path / "grown") as lib:
        tasks = {row.task_key for row in lib.select(DatasetQuery(source_ids=(
            "save:run-2", "save:human-1", "save:magma-2")))}  # fmt: skip
    assert sorted(report["affected_tasks"]) == sorted(tasks)


def test_only_affected_tasks_are_reranked(tmp_path: Path) -> None:
    """A new attempt at one task re-ranks that task; the other task's rows are unchanged."""
    coached_save(tmp_path / "a" / "run-1", "run-1", "sw0-sw4")
    magma_save(tmp_path / "a" / "magma-1")
    build_library([tmp_path / "a"], tmp_path / "base", "r1")
    attempt = situation(0, None, [candidate(0, say("pressed it"), "suboptimal")],
                        content="press the one button")  # fmt: skip
    write_run(tmp_path / "b" / "magma-9", [attempt], magma_config("magma-9", "sw7"))
    append_library(tmp_path / "base", [tmp_path / "b"], tmp_path / "grown", "r2")
    report = json.loads((tmp_path / "grown" / "append_report.json").read_text())
    assert [key.split("/")[1] for key in report["affected_tasks"]] == ["sw7"]
    before, after = _facts(tmp_path / "base"), _facts(tmp_path / "grown")
    with CanonicalDatasetAdapter(tmp_path / "grown") as lib:
        untouched = {row.trajectory_id for row in lib.select(DatasetQuery(targets="sw0-sw4"))}
        sw7 = [(row.task_rank, row.quality_tier) for row in lib.select(DatasetQuery(targets="sw7"))]
    assert [fact for fact in before if fact[0] in untouched] == [
        fact for fact in after if fact[0] in untouched
    ]
    assert sorted(sw7) == [(1, "optimal"), (2, "acceptable"), (3, "failed")]


def test_a_release_name_is_used_once(campaigns: tuple[Path, Path], tmp_path: Path) -> None:
    """Appending under the base's own release name is refused and writes nothing."""
    first, second = campaigns
    build_library([first], tmp_path / "base", "r1")
    with pytest.raises(LibraryError, match="release 'r1' is already in the base library"):
        append_library(tmp_path / "base", [second], tmp_path / "grown", "r1")
    assert not (tmp_path / "grown").exists()


def test_canonical_output_is_reviewed_then_appended(tmp_path: Path) -> None:
    """Seed 002's sequence: a source adapter writes canonical records (`canonical`), they
    are reviewed, and `append` (or `build`) takes the file: the records keep their own
    source id, revision and locator, and give the same records as appending the source."""
    coached_save(tmp_path / "a" / "run-1", "run-1", "sw0-sw4")
    human_save(tmp_path / "b" / "human-1")
    build_library([tmp_path / "a"], tmp_path / "base", "r1")
    reviewed = tmp_path / "review" / "human-1.jsonl"
    write_canonical([tmp_path / "b"], reviewed)
    append_library(tmp_path / "base", [reviewed], tmp_path / "grown", "r2")
    append_library(tmp_path / "base", [tmp_path / "b"], tmp_path / "direct", "r2")
    assert _facts(tmp_path / "grown") == _facts(tmp_path / "direct")
    with CanonicalDatasetAdapter(tmp_path / "grown") as lib:
        assert "save:human-1" in lib.available_sources()
    build_library([reviewed], tmp_path / "built", "r1")
    again = append_library(tmp_path / "direct", [reviewed], tmp_path / "again", "r3")
    assert again.already_present == ["human-1.jsonl"]  # that source revision is in the base


def test_a_canonical_record_edited_after_it_was_written_is_refused(tmp_path: Path) -> None:
    """A record whose content no longer hashes to its id skips its file, with the line."""
    human_save(tmp_path / "b" / "human-1")
    coached_save(tmp_path / "a" / "run-1", "run-1", "sw0-sw4")
    reviewed = tmp_path / "human-1.jsonl"
    write_canonical([tmp_path / "b"], reviewed)
    lines = reviewed.read_text().splitlines()
    record = json.loads(lines[0])
    record["system"] = "an edited system prompt"
    reviewed.write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
    result = build_library([reviewed, tmp_path / "a"], tmp_path / "lib", "r1")
    (skipped,) = result.skipped
    assert "line 1: record" in skipped.reason
    assert "does not match its content" in skipped.reason
