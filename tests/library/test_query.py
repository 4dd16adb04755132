"""DatasetQuery: OR within a field, AND across, aliases, selections and the training gates."""

from __future__ import annotations

import pytest

from gencoach.library import (
    CanonicalDatasetAdapter,
    DatasetQuery,
    Outcome,
    QueryError,
    Split,
    TrainingView,
    TrajectorySelection,
)


def test_or_within_a_field_and_across_fields(library: CanonicalDatasetAdapter) -> None:
    """Two targets select both tasks; adding an outcome keeps only what matches both."""
    both = library.select(DatasetQuery(targets=("sw0-sw4", "sw1-sw2")))
    assert {row.target for row in both} == {"sw0-sw4", "sw1-sw2"}
    assert len(both) == 10
    successful = library.select(DatasetQuery(targets=("sw0-sw4", "sw1-sw2"), outcomes="success"))
    assert {row.outcome_category for row in successful} == {"success"}
    assert len(successful) == 6


def test_aliases_and_enums_are_the_same_query() -> None:
    """`best` and `turn` mean the enums; a single string is a one-value field."""
    assert DatasetQuery(selection="best") == DatasetQuery(
        selection=TrajectorySelection.BEST_VERIFIED
    )
    assert DatasetQuery(supported_views="turn").supported_views == (TrainingView.ASSISTANT_TURN,)
    assert DatasetQuery(scenarios="buttons").scenarios == ("buttons",)
    assert DatasetQuery(outcomes=["success", Outcome.FAILURE]).outcomes == (
        Outcome.SUCCESS,
        Outcome.FAILURE,
    )


def test_unknown_values_are_refused_with_the_choices() -> None:
    """A misspelt selection names the field and every accepted value."""
    with pytest.raises(QueryError) as caught:
        DatasetQuery(selection="bestest")
    assert str(caught.value) == (
        "selection: unknown value 'bestest'; one of: all_attempts, all_successful, "
        "best_verified, all, best, successful"
    )
    with pytest.raises(QueryError, match=r"^scenarios: expected strings, got 3$"):
        DatasetQuery(scenarios=[3])


def test_best_verified_gives_at_most_one_successful_per_task(
    library: CanonicalDatasetAdapter,
) -> None:
    """Best-verified keeps the best successful trajectory of each task, none for a task
    without success."""
    rows = library.select(DatasetQuery(selection="best"))
    tasks = [row.task_key for row in rows]
    assert len(tasks) == len(set(tasks)) == 5
    assert all(row.outcome_category == "success" and row.task_rank == 1 for row in rows)


def test_filters_never_rewrite_ranks(library: CanonicalDatasetAdapter) -> None:
    """A row's rank is the same whether or not a filter removed its betters."""
    everything = {row.trajectory_id: (row.quality_rank, row.task_rank) for row in library.select()}
    coached = library.select(DatasetQuery(demonstration_provenance="coached_correction"))
    assert coached
    assert all(
        everything[row.trajectory_id] == (row.quality_rank, row.task_rank) for row in coached
    )
    assert any(row.quality_rank > 1 for row in coached)
    best_coached = library.select(
        DatasetQuery(
            demonstration_provenance="coached_correction", selection="best", targets="sw0-sw4"
        )
    )
    assert [row.task_rank for row in best_coached] == [2]


def test_for_training_gates_and_never_protected(library: CanonicalDatasetAdapter) -> None:
    """Training queries keep eligible rows only and exclude protected evaluation tasks."""
    query = DatasetQuery.for_training(scenarios="buttons")
    assert query.training_eligible
    assert query.structurally_eligible
    assert Split.PROTECTED_EVALUATION in query.excluded_splits
    rows = library.select(query)
    assert rows
    assert all(row.training_eligible and row.split != "protected_evaluation" for row in rows)
    with pytest.raises(QueryError, match="protected_evaluation is never used for training"):
        DatasetQuery.for_training(splits="protected_evaluation")


def test_every_task_is_in_exactly_one_split(library: CanonicalDatasetAdapter) -> None:
    """All trajectories of a task share its split, and the splits partition the rows."""
    splits: dict[str, set[str]] = {}
    for row in library.select():
        splits.setdefault(row.task_key, set()).add(row.split)
    assert all(len(found) == 1 for found in splits.values())
    per_split = sum(len(library.select(DatasetQuery(splits=(split,)))) for split in Split)
    assert per_split == len(library.select())


def test_agents_match_by_id_or_id_and_version(library: CanonicalDatasetAdapter) -> None:
    """`agents` accepts a bare agent id or `id@version`."""
    everything = len(library.select())
    assert len(library.select(DatasetQuery(agents="reference-agent"))) == everything
    assert len(library.select(DatasetQuery(agents="reference-agent@1.0.0"))) == everything
    assert library.select(DatasetQuery(agents="reference-agent@9")) == []


def test_alternatives_come_in_quality_order(library: CanonicalDatasetAdapter) -> None:
    """A task's alternatives run from its best trajectory down, failures last."""
    task = library.select(DatasetQuery(targets="sw0-sw4"))[0].task_key
    alternatives = library.alternatives(task)
    assert [record.metadata.task_rank for record in alternatives] == [1, 2, 3, 4, 5]
    assert [record.metadata.quality_tier for record in alternatives] == [
        "optimal", "optimal", "acceptable", "failed", "failed"
    ]  # fmt: skip
    environment = alternatives[0].metadata.environment_key
    assert library.alternatives(task, environment) == alternatives
    assert library.alternatives(task, "elsewhere@1/buttons@unversioned") == []


def test_evaluation_bundle_holds_the_reference_and_every_attempt(
    library: CanonicalDatasetAdapter,
) -> None:
    """The bundle names the task and its split, the best success as reference, all attempts."""
    row = library.select(DatasetQuery(targets="sw0-human"))[0]
    bundle = library.evaluation_bundle(row.task_key)
    assert bundle.task["target"] == "sw0-human"
    assert bundle.split == row.split
    assert bundle.best is not None
    assert bundle.best.metadata.demonstration_provenance == "human_correction"
    assert bundle.best.outcome.success is True
    assert bundle.best.verification.method == "simulator task checks"
    assert bundle.outcomes == {"failure": 1, "success": 1}
    assert [reference.metadata.task_rank for reference in bundle.references] == [1, 2]
    assert [r.outcome.success for r in bundle.references] == [True, False]
