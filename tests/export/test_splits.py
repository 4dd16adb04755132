"""Task partition: whole tasks per split, the 0/1/2/n edge cases, determinism."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gencoach.errors import ExportError
from gencoach.export.splits import Folder, Task, folder_validation_size, partition, validation_size
from tests.support.exports import Export, read_rows
from tests.support.saved_runs import run_config, write_run


def _target(key: Task | Folder) -> str:
    """The target of a split key the export split by task."""
    assert isinstance(key, Task), key
    return key.target


def _tasks(count: int) -> list[Task]:
    return [Task("scenario", f"target-{index}") for index in range(count)]


@pytest.mark.parametrize(
    ("tasks", "ratio", "expected"),
    [
        (0, 0.05, 0),
        (1, 0.05, 0),
        (1, 0.9, 0),
        (2, 0.05, 1),
        (2, 0.9, 1),
        (10, 0.05, 1),
        (10, 0.25, 3),
        (50, 0.05, 3),
        (100, 0.05, 5),
        (10, 0.0, 0),
    ],
)
def test_validation_size(tasks: int, ratio: float, expected: int) -> None:
    """round(n * ratio) half up, at least 1 from 2 tasks on, never all; ratio 0 means none."""
    assert validation_size(tasks, ratio) == expected


def test_partition_puts_every_task_on_exactly_one_side() -> None:
    """The two sides are disjoint, cover every task, and are sorted."""
    tasks = _tasks(20)
    result = partition(tasks + tasks[:5], 0.2, seed=42)
    assert len(result.validation) == 4
    assert set(result.train).isdisjoint(result.validation)
    assert set(result.train) | set(result.validation) == set(tasks)
    assert list(result.validation) == sorted(result.validation)


def test_partition_is_deterministic_per_seed_and_ignores_input_order() -> None:
    """Same tasks and seed, any order: same partition; another seed draws another one."""
    tasks = _tasks(20)
    first = partition(tasks, 0.25, seed=7)
    assert partition(list(reversed(tasks)), 0.25, seed=7) == first
    draws = {partition(tasks, 0.25, seed=seed).validation for seed in range(5)}
    assert len(draws) > 1


def test_a_single_task_goes_to_train(export: Export, source: Path) -> None:
    """With one task, validation files exist but are empty; every row trains."""
    write_run(source / "a")
    write_run(source / "b", config=run_config("run-2"))
    outcome = export("chat", dedupe=False)
    datasets = source / "datasets" / "chat"
    assert outcome.partition is not None
    assert outcome.partition.validation == ()
    assert read_rows(datasets / "chat_validation.jsonl") == []
    assert len(read_rows(datasets / "chat_train.jsonl")) == outcome.rows["chat"] == 10


def test_rows_of_one_task_never_straddle_splits(export: Export, source: Path) -> None:
    """Runs and branches of one scenario and target land together; tasks are split whole."""
    for index in range(6):
        config = run_config(f"run-{index}", target=f"t{index % 3}")
        write_run(source / f"run-{index}", config=config)
    outcome = export("chat", dedupe=False, validation_ratio=0.3, split_seed=3)
    datasets = source / "datasets" / "chat"

    def tasks_of(name: str) -> set[str]:
        return {row["target"] for row in read_rows(datasets / name)}

    train, validation = tasks_of("chat_train.jsonl"), tasks_of("chat_validation.jsonl")
    assert outcome.partition is not None
    assert validation == {_target(task) for task in outcome.partition.validation}
    assert len(validation) == 1
    assert len(train) == 2
    assert train.isdisjoint(validation)
    full = read_rows(datasets / "chat.jsonl")
    assert len(full) == 30
    assert sorted(map(str, full)) == sorted(
        map(
            str,
            read_rows(datasets / "chat_train.jsonl")
            + read_rows(datasets / "chat_validation.jsonl"),
        )
    )


def test_the_same_saves_and_seeds_export_the_same_bytes(export: Export, source: Path) -> None:
    """Exporting twice with the same settings writes identical files."""
    for index in range(4):
        write_run(source / f"run-{index}", config=run_config(f"run-{index}", target=f"t{index}"))
    export("chat", dedupe=False, validation_ratio=0.5)
    first = {path.name: path.read_bytes() for path in (source / "datasets" / "chat").iterdir()}
    export("chat", dedupe=False, validation_ratio=0.5)
    second = {path.name: path.read_bytes() for path in (source / "datasets" / "chat").iterdir()}
    assert first == second


def test_tasks_without_rows_take_no_validation_slot(export: Export, source: Path) -> None:
    """A task whose saves yield no row is left out of the partition, so validation is not empty."""
    write_run(source / "a", config=run_config("run-a", target="good"))
    write_run(source / "b", config=run_config("run-b", target="also-good"))
    write_run(source / "c", [], config=run_config("run-c", target="empty", roots=()))
    outcome = export("chat", dedupe=False, validation_ratio=0.5)
    assert outcome.partition is not None
    listed = {_target(task) for task in outcome.partition.train + outcome.partition.validation}
    assert listed == {"good", "also-good"}
    assert len(read_rows(source / "datasets" / "chat" / "chat_validation.jsonl")) == 5


@pytest.mark.parametrize(
    ("folders", "ratio", "expected"),
    [(1, 0.5, 0), (2, 0.05, 1), (4, 0.625, 2), (10, 0.25, 2), (10, 0.35, 4), (3, 0.99, 2)],
)
def test_folder_validation_size_is_magma_gens(folders: int, ratio: float, expected: int) -> None:
    """Python's round (half to even: 2.5 → 2), at least 1 from 2 folders on, never all."""
    assert folder_validation_size(folders, ratio) == expected


@pytest.mark.parametrize("ratio", [0.0, 1.0, -0.1])
def test_split_by_folder_needs_a_ratio_strictly_between_0_and_1(
    export: Export, source: Path, ratio: float
) -> None:
    """MAGMA-GEN refuses a ratio of 0 or 1 for its folder split; so does gencoach, by name."""
    write_run(source / "a")
    with pytest.raises(ExportError) as caught:
        export("chat", dedupe=False, split_by="folder", validation_ratio=ratio)
    assert caught.value.reason == (
        "with --split-by folder the validation ratio must be strictly between 0 and 1, "
        f"as MAGMA-GEN requires; got {ratio}"
    )
    assert not (source / "datasets").exists()


def test_split_by_folder_makes_each_save_folder_a_task(export: Export, source: Path) -> None:
    """Two runs of one task in two folders may land on both sides; the manifest names folders."""
    for name in ("a", "b", "c", "d"):
        write_run(source / name, config=run_config(f"run-{name}"))
    outcome = export("chat", dedupe=False, split_by="folder", validation_ratio=0.5, split_seed=1)
    assert outcome.partition is not None
    assert len(outcome.partition.validation) == 2
    validation = {key.name for key in outcome.partition.validation if isinstance(key, Folder)}
    rows = read_rows(source / "datasets" / "chat" / "chat_validation.jsonl")
    assert {row["run_id"] for row in rows} == {f"run-{name}" for name in validation}
    manifest = json.loads((source / "datasets" / "chat" / "export_manifest.json").read_text())
    assert manifest["split"]["validation"] == [{"folder": name} for name in sorted(validation)]
    assert manifest["settings"]["split_by"] == "folder"


def test_split_by_folder_counts_folders_without_rows(export: Export, source: Path) -> None:
    """As MAGMA-GEN does, every read folder is a task, rows or not."""
    write_run(source / "a", config=run_config("run-a"))
    write_run(source / "b", [], config=run_config("run-b", roots=()))
    outcome = export("chat", dedupe=False, split_by="folder", validation_ratio=0.5)
    assert outcome.partition is not None
    listed = outcome.partition.train + outcome.partition.validation
    assert sorted(key.name for key in listed if isinstance(key, Folder)) == ["a", "b"]


def test_split_by_folder_shuffles_with_one_stream_in_path_order(
    export: Export, source: Path
) -> None:
    """One seeded stream serves every example in turn: copies of a save shuffle differently."""
    write_run(source / "a", config=run_config("run-a"))
    write_run(source / "b", config=run_config("run-b"))
    export("full-history", split_by="folder", validation_ratio=0.5, dedupe=False)
    rows = read_rows(source / "datasets" / "full-history" / "hr_data.json")
    first = [row["tools"] for row in rows if row["metadata"]["run_id"] == "run-a"]
    second = [row["tools"] for row in rows if row["metadata"]["run_id"] == "run-b"]
    assert len(first) == len(second) > 0
    assert first != second
