"""The documented consumer examples, run as they are written against a test library.

Each test is one example of the canonical dataset adapter's documentation (API 1.3),
with its benchmark and source names replaced by the ones this library holds: gencoach
saves (`gencoach/buttons`), τ-bench results (`tau-bench`), and a ShareGPT file indexed
metadata-only and supplied by an overlay.
"""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from gencoach.library import (
    CanonicalDatasetAdapter,
    DatasetQuery,
    MissingTrajectoryContentError,
    SamplingConfig,
    SamplingStrategy,
    TrainingView,
    TrajectorySelection,
)
from gencoach.library.build import build_library, write_canonical
from tests.library.sources import coached_save, human_save

FIXTURES = Path(__file__).parent / "fixtures"
TAU = "tau-bench:tau_bench_retail.json"
SHAREGPT = "chat:sharegpt.jsonl"
SAVES = "gencoach/buttons"
EVALUATION_SPLITS = ("validation", "test", "protected_evaluation")
PERMISSIONS = """
sources:
  "tau-bench:*":
    research: permitted
    model_training: conditional
    commercial_training: prohibited
    transformed_redistribution: unknown
    training_verification: verified
    conditions: ["cite the benchmark"]
    audit: {by: data-review}
"""


def _tau_results(path: Path, tasks: int) -> Path:
    """τ-bench results for `tasks` tasks, two trials each (one passed, one failed)."""
    template = json.loads((FIXTURES / "tau_bench_retail.json").read_text())
    results = []
    for task in range(tasks):
        for trial in template:
            result = copy.deepcopy(trial)
            result["task_id"] = task
            result["info"]["task"]["instruction"] += f" (case {task})"
            results.append(result)
    path.write_text(json.dumps(results))
    return path


@pytest.fixture(scope="module")
def seed_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Saves, τ-bench results with a permission audit, a metadata-only ShareGPT source;
    the split seed is the first that puts τ-bench tasks in train and in evaluation."""
    root = tmp_path_factory.mktemp("seed")
    saves = root / "saves"
    coached_save(saves / "run-1", "run-1", "sw0-sw4")
    coached_save(saves / "run-2", "run-2", "sw1-sw2")
    human_save(saves / "human-1")
    # The same run under another id: another source, the same content (collapsed).
    shutil.copytree(saves / "run-1", saves / "copy")
    config = json.loads((saves / "copy" / "config.json").read_text())
    (saves / "copy" / "config.json").write_text(json.dumps({**config, "run_id": "copy"}))
    tau = _tau_results(root / "tau_bench_retail.json", tasks=8)
    shutil.copy(FIXTURES / "sharegpt.jsonl", root / "sharegpt.jsonl")
    (root / "permissions.yaml").write_text(PERMISSIONS)
    for seed in range(100):
        output = root / f"library-{seed}"
        build_library([saves, tau], output, "r1", split_seed=seed,
                      permissions=root / "permissions.yaml")  # fmt: skip
        with CanonicalDatasetAdapter(output) as lib:
            splits = {row.split for row in lib.metadata(DatasetQuery(source_ids=(TAU,)))}
            saved = {row.split for row in lib.metadata(DatasetQuery(benchmarks=(SAVES,)))}
        if "train" in splits and splits & set(EVALUATION_SPLITS) and "train" in saved:
            return output
        shutil.rmtree(output)
    raise AssertionError("no split seed below 100 covers the examples")


@pytest.fixture(scope="module")
def federated(seed_library: Path) -> Path:
    """A release indexing the ShareGPT file metadata-only beside hosted τ-bench results;
    `authorized/sharegpt.jsonl` next to it holds the canonical records (the overlay)."""
    root = seed_library.parent
    output = root / "federated"
    build_library([root / "tau_bench_retail.json"], output, "r1",
                  metadata_only=[root / "sharegpt.jsonl"])  # fmt: skip
    write_canonical([root / "sharegpt.jsonl"], root / "authorized" / "sharegpt.jsonl")
    return output


@pytest.fixture
def dataset(seed_library: Path) -> Iterator[CanonicalDatasetAdapter]:
    with CanonicalDatasetAdapter(seed_library) as opened:
        yield opened


def test_opening_and_the_inventory(seed_library: Path) -> None:
    """`available_benchmarks()` and `available_sources()` list the whole inventory."""
    dataset = CanonicalDatasetAdapter(seed_library)
    assert dataset.available_benchmarks() == ["gencoach/buttons", "tau-bench"]
    assert TAU in dataset.available_sources()
    assert "save:run-1" in dataset.available_sources()
    assert dataset.content_sources() == dataset.available_sources()
    assert dataset.api_version == "1.3"


def test_expert_and_successful_agent_queries(dataset: CanonicalDatasetAdapter) -> None:
    """Expert demonstrations and successful agent completions are separate filters."""
    experts = DatasetQuery(
        demonstration_provenance=("expert_or_reference_demonstration",),
    )
    successful_agents = DatasetQuery(
        demonstration_provenance=("recorded_agent_completion",),
        selection=TrajectorySelection.ALL_SUCCESSFUL,
    )
    assert list(dataset.metadata(experts)) == []  # saves and τ-bench hold none
    rows = list(dataset.metadata(successful_agents))
    assert rows
    assert all(row.outcome_category == "success" for row in rows)


def test_full_trajectory_sft(dataset: CanonicalDatasetAdapter) -> None:
    """Full examples: model input, an aligned loss mask, lineage in metadata."""
    query = DatasetQuery.for_training(
        benchmarks=(SAVES, "tau-bench"),
        splits=("train",),
        selection=TrajectorySelection.ALL_SUCCESSFUL,
    )
    seen = 0
    for example in dataset.iter_examples(query, view=TrainingView.FULL_TRAJECTORY):
        row = example.to_dict()
        model_input = row["model_input"]
        loss_mask = row["loss_mask"]
        lineage = row["metadata"]["lineage"]
        assert len(loss_mask) == len(model_input)
        assert lineage["turn_ids"] == row["target_event_ids"]
        assert "outcome" not in json.dumps(model_input)
        seen += 1
    assert seen > 0


def test_assistant_turn_sft(dataset: CanonicalDatasetAdapter) -> None:
    """Turn examples: the causal prefix, and the target's id in the lineage."""
    query = DatasetQuery.for_training(
        source_ids=(TAU,),
        splits=("train",),
    )
    seen = 0
    for turn in dataset.iter_examples(query, view=TrainingView.ASSISTANT_TURN):
        row = turn.to_dict()
        assert len(row["context"]) == row["target_index"]
        assert row["target_event_id"] == row["metadata"]["lineage"]["turn_id"]
        model_input = row["model_input"]  # causal prefix only
        supervised_target = row["supervised_target"]
        assert model_input == row["context"]
        assert supervised_target["role"] == "assistant"
        seen += 1
    assert seen > 0


def test_best_trajectory_per_task(dataset: CanonicalDatasetAdapter) -> None:
    """Best verified: at most one successful, evaluator-verified trajectory per task."""
    best = DatasetQuery(
        benchmarks=(SAVES,),
        splits=("train",),
        selection=TrajectorySelection.BEST_VERIFIED,
    )
    tasks = []
    for record in dataset.iter_records(best):
        print(record.metadata.task_key, record.metadata.quality_rank)
        tasks.append(record.metadata.task_key)
        assert record.metadata.verification_method == "simulator task checks"
    assert tasks
    assert len(tasks) == len(set(tasks))


def test_one_exact_trajectory_by_a_collapsed_id(dataset: CanonicalDatasetAdapter) -> None:
    """A collapsed duplicate's own id resolves to the retained canonical record."""
    shared = next(row for row in dataset.metadata() if len(row.contributing_trajectory_ids) > 1)
    duplicate = shared.contributing_trajectory_ids[1]
    record = dataset.get_trajectory(duplicate)
    print(record.trajectory.events)
    print(record.lineage())
    assert record.metadata.trajectory_id == shared.trajectory_id != duplicate
    assert [c["trajectory_id"] for c in record.lineage()["contributors"]] == list(
        shared.contributing_trajectory_ids
    )


def test_all_completions_of_a_task_in_quality_order(dataset: CanonicalDatasetAdapter) -> None:
    """`alternatives` enumerates a task's attempts, best first."""
    first = next(dataset.metadata(DatasetQuery(source_ids=(TAU,))))
    attempts = dataset.alternatives(first.task_key)
    for attempt in attempts:
        print(
            attempt.metadata.trajectory_id,
            attempt.metadata.quality_rank,
            attempt.metadata.outcome_category,
            attempt.metadata.agent_model,
        )
    assert [a.metadata.outcome_category for a in attempts] == ["success", "failure"]


def test_deterministic_sampling(dataset: CanonicalDatasetAdapter) -> None:
    """Uniform, task and source-balanced draws; the same seed gives the same ids."""
    population = DatasetQuery.for_training(splits=("train",))
    random_sample = SamplingConfig(count=1_000, seed=42)
    task_sample = SamplingConfig(count=1_000, seed=42, strategy=SamplingStrategy.TASK)
    balanced_sample = SamplingConfig(
        count=1_000, seed=42, strategy=SamplingStrategy.SOURCE_BALANCED
    )
    drawn = []
    for record in dataset.iter_records(population, sampling=balanced_sample):
        print(record.metadata.trajectory_id, record.metadata.source_id)
        drawn.append(record.metadata.trajectory_id)
    again = [row.trajectory_id for row in dataset.metadata(population, balanced_sample)]
    assert drawn == again
    tasks = [row.task_key for row in dataset.metadata(population, task_sample)]
    assert len(tasks) == len(set(tasks))
    assert len(list(dataset.metadata(population, random_sample))) == len(drawn)


def test_streaming_and_batching(dataset: CanonicalDatasetAdapter) -> None:
    """Bounded Python batches of example dicts."""
    sizes = []
    for batch in dataset.iter_batches(
        8,
        DatasetQuery.for_training(splits=("train",)),
        view=TrainingView.ASSISTANT_TURN,
    ):
        rows = [example.to_dict() for example in batch]
        print(len(rows), rows[0]["sample_id"])
        sizes.append(len(rows))
    assert sizes
    assert all(size <= 8 for size in sizes)


def test_evaluation_over_all_trajectories(dataset: CanonicalDatasetAdapter) -> None:
    """Evaluation splits, every attempt, and one task's bundle of references."""
    evaluation = DatasetQuery(
        benchmarks=("tau-bench",),
        splits=EVALUATION_SPLITS,
        selection=TrajectorySelection.ALL_ATTEMPTS,
    )
    outcomes = set()
    for record in dataset.iter_records(evaluation):
        print(record.metadata.task_key, record.trajectory.outcome.success)
        outcomes.add(record.trajectory.outcome.success)
    assert outcomes == {True, False}
    task = next(dataset.metadata(evaluation)).task_key
    bundle = dataset.evaluation_bundle(task, query=evaluation)
    for reference in bundle.references:
        print(
            reference.trajectory_id,
            reference.outcome.success,
            reference.verification.method,
            reference.verification.evidence,
            reference.supervised_targets,
        )
    assert [r.outcome.success for r in bundle.references] == [True, False]
    assert bundle.references[0].verification.evidence["reward"] == 1.0
    assert bundle.best is bundle.references[0]


def test_permissions_and_availability(dataset: CanonicalDatasetAdapter) -> None:
    """A source's audit as given at build time; an unaudited source is unknown."""
    rights = dataset.permissions(TAU)
    print(rights.dimensions["model_training"])
    print(dataset.content_availability(TAU))
    assert rights.dimensions == {
        "research": "permitted", "model_training": "conditional",
        "commercial_training": "prohibited", "transformed_redistribution": "unknown",
    }  # fmt: skip
    assert rights.training_verification == "verified"
    assert rights.conditions == ("cite the benchmark",)
    assert dataset.content_availability(TAU) == "hosted"
    assert set(dataset.permissions("save:run-1").dimensions.values()) == {"unknown"}
    training = DatasetQuery(training_permissions=("conditional",))
    assert {row.source_id for row in dataset.metadata(training)} == {TAU}


def test_metadata_only_sources_are_listed_never_silently_dropped(federated: Path) -> None:
    """Metadata queries list metadata-only records; asking for their payload raises."""
    dataset = CanonicalDatasetAdapter(federated)
    assert SHAREGPT in dataset.available_sources()
    assert SHAREGPT not in dataset.content_sources()
    assert dataset.content_availability(SHAREGPT) == "metadata_only"
    query = DatasetQuery(source_ids=(SHAREGPT,))
    rows = list(dataset.metadata(query))
    assert [row.content_availability for row in rows] == ["metadata_only"] * 2
    experts = DatasetQuery(demonstration_provenance=("expert_or_reference_demonstration",))
    assert [row.source_id for row in dataset.metadata(experts)] == [SHAREGPT]
    with pytest.raises(MissingTrajectoryContentError) as caught:
        dataset.iter_records(query)
    assert caught.value.source_ids == [SHAREGPT]
    assert "metadata-only sources: chat:sharegpt.jsonl" in str(caught.value)
    dataset.close()


def test_an_authorized_overlay_supplies_the_payloads(federated: Path) -> None:
    """An overlay joins by canonical id; it is read, not copied."""
    overlay = federated.parent / "authorized" / "sharegpt.jsonl"
    dataset = CanonicalDatasetAdapter(
        federated,
        content_overlays={
            SHAREGPT: overlay.parent,
        },
    )
    query = DatasetQuery(
        source_ids=(SHAREGPT,),
        content_availability=("overlay",),
    )
    records = list(dataset.iter_records(query))
    assert len(records) == 2
    assert records[0].trajectory.source_id == SHAREGPT
    assert dataset.content_availability(SHAREGPT) == "overlay"
    assert SHAREGPT in dataset.content_sources()
    assert not any(path.name.startswith("sharegpt") for path in federated.rglob("*"))
    dataset.close()
