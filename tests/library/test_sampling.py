"""Deterministic sampling: same library, query and seed give the same ordered ids."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gencoach.library import (
    CanonicalDatasetAdapter,
    DatasetQuery,
    QueryError,
    SamplingConfig,
    SamplingStrategy,
)
from gencoach.library.metadata import PermissionRecord, TrajectoryMetadata
from gencoach.library.sampling import sample

_DRAW = """
import sys
from gencoach.library import CanonicalDatasetAdapter, DatasetQuery, SamplingConfig
with CanonicalDatasetAdapter(sys.argv[1]) as lib:
    rows = lib.select(DatasetQuery(outcomes="success"), SamplingConfig(5, 11, sys.argv[2]))
    print(",".join(row.trajectory_id for row in rows))
"""


def _row(tid: str, task: str, source: str, task_rank: int = 1) -> TrajectoryMetadata:
    return TrajectoryMetadata(
        tid, task, "env", "bench", "s", "t", source, "rev", None, "{}", "unknown", "a@1",
        "recorded_agent_completion", "success", 1.0, "optimal", task_rank, task_rank, "train",
        True, True, "simulator task checks", "source_evaluator", False, 1, 1, (), "hosted",
        PermissionRecord.unknown(source), (tid,), 1, "shards/000000.jsonl", 0, 1,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("strategy", list(SamplingStrategy))
def test_same_seed_same_ordered_ids_in_another_process(
    library: CanonicalDatasetAdapter, strategy: SamplingStrategy
) -> None:
    """A draw repeated in a fresh interpreter gives the same ids in the same order."""
    here = library.select(DatasetQuery(outcomes="success"), SamplingConfig(5, 11, strategy))
    result = subprocess.run(
        [sys.executable, "-c", _DRAW, str(library.path), strategy.value],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert result.stdout.strip() == ",".join(row.trajectory_id for row in here)
    assert [r.metadata.trajectory_id for r in library.iter_records(DatasetQuery(outcomes="success"),
            SamplingConfig(5, 11, strategy))] == [row.trajectory_id for row in here]  # fmt: skip


def test_another_seed_draws_another_order(library: CanonicalDatasetAdapter) -> None:
    """Seeds matter: two seeds give two different orders of the same rows."""
    draws = {
        tuple(row.trajectory_id for row in library.select(sampling=SamplingConfig(100, seed)))
        for seed in range(5)
    }
    assert len(draws) > 1
    assert all(sorted(draw) == sorted(next(iter(draws))) for draw in draws)


def test_by_task_draws_each_task_once_by_its_best_attempt() -> None:
    """By task, a drawn task is represented by its best attempt among the selected rows."""
    rows = [_row("a2", "A", "s", 2), _row("a1", "A", "s", 1), _row("b3", "B", "s", 3)]
    drawn = sample(rows, SamplingConfig(10, 1, "task"))
    assert sorted(row.trajectory_id for row in drawn) == ["a1", "b3"]


def test_source_balanced_takes_turns_and_redistributes() -> None:
    """Sources alternate; when one runs out, the others fill the count."""
    rows = [_row(f"a{i}", f"A{i}", "alpha") for i in range(5)] + [_row("b0", "B", "beta")]
    drawn = sample(rows, SamplingConfig(4, 3, SamplingStrategy.SOURCE_BALANCED))
    sources = [row.source_id for row in drawn]
    assert sources[:2] == ["alpha", "beta"]
    assert sources.count("alpha") == 3
    assert len(drawn) == 4


def test_with_replacement_reaches_the_count() -> None:
    """With replacement a draw may repeat rows and always yields `count` of them."""
    rows = [_row("a", "A", "s"), _row("b", "B", "s")]
    for strategy in SamplingStrategy:
        drawn = sample(rows, SamplingConfig(7, 5, strategy, with_replacement=True))
        assert len(drawn) == 7


def test_bad_sampling_settings_are_refused() -> None:
    """A negative count or an unknown strategy names the setting."""
    with pytest.raises(QueryError, match=r"^count: must be a non-negative integer, got -1$"):
        SamplingConfig(-1)
    with pytest.raises(QueryError, match=r"^strategy: unknown value 'fair'"):
        SamplingConfig(3, strategy="fair")
