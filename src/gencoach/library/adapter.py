"""`CanonicalDatasetAdapter`: the consumer side of a library, read-only.

It reads `manifest.json` (format version, and the SHA-256 of the index and of every
shard), opens `index.sqlite` read-only and parses shard payloads one trajectory at a
time, only for the rows a query selected. It imports no source parser and writes
nothing. Its API has its own version, `API_VERSION`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from gencoach.library.errors import LibraryError
from gencoach.library.index import IndexReader, IndexRow
from gencoach.library.layout import API_VERSION, INDEX_FILE
from gencoach.library.manifest import Manifest, read_manifest, verify_files
from gencoach.library.query import DatasetQuery, TrainingView, coerce
from gencoach.library.records import Contributor, Outcome, Trajectory
from gencoach.library.sampling import SamplingConfig, sample
from gencoach.library.views import Example, assistant_turns, full_trajectory


@dataclass(frozen=True)
class EvaluationBundle:
    """What evaluating on one task needs: the task, its split, its reference and attempts."""

    task_key: str
    task: dict[str, str]
    split: str
    environment_keys: list[str]
    reference: Trajectory | None
    """The task's best successful trajectory, if it has one."""
    attempts: list[IndexRow] = field(default_factory=list)
    """Every trajectory of the task, in quality order."""
    outcomes: dict[str, int] = field(default_factory=dict)


class CanonicalDatasetAdapter:
    """A persisted trajectory library, for training and evaluation jobs."""

    api_version = API_VERSION

    def __init__(self, path: str | Path, *, verify_hashes: bool = True) -> None:
        self.path = Path(path)
        self.manifest: Manifest = read_manifest(self.path)
        verify_files(self.path, self.manifest, hashes=verify_hashes)
        self._index = IndexReader(self.path / INDEX_FILE)
        self._shards: dict[str, int] = {}  # shard → open file descriptor

    def __enter__(self) -> CanonicalDatasetAdapter:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the index and every open shard."""
        for descriptor in self._shards.values():
            os.close(descriptor)
        self._shards.clear()
        self._index.close()

    @property
    def release(self) -> str:
        """The release name of this library."""
        return self.manifest.release

    def metadata(
        self, query: DatasetQuery | None = None, sampling: SamplingConfig | None = None
    ) -> list[IndexRow]:
        """The index rows a query (and sampling) selects; no payload is read."""
        rows = self._index.select(query or DatasetQuery())
        return rows if sampling is None else sample(rows, sampling)

    def _payload(self, row: IndexRow) -> dict[str, Any]:
        descriptor = self._shards.get(row.shard)
        if descriptor is None:
            descriptor = self._shards[row.shard] = os.open(self.path / row.shard, os.O_RDONLY)
        # One positioned read per record: no buffer to refill, nothing mapped in memory.
        data = os.pread(descriptor, row.length, row.offset)
        if len(data) != row.length:
            raise LibraryError(self.path / row.shard, f"ends before the record of {row.id}")
        payload: dict[str, Any] = json.loads(data)
        return payload

    def _record(self, row: IndexRow, contributors: tuple[Contributor, ...] | None) -> Trajectory:
        payload = self._payload(row)
        if contributors is None:
            own = Contributor(payload["source_id"], payload["source_revision"], payload["locator"])
            contributors = (own,)
        return Trajectory.from_payload(
            payload,
            split=row.split,
            rank=row.rank,
            task_rank=row.task_rank,
            contributors=contributors,
        )

    def records_of(self, rows: list[IndexRow]) -> Iterator[Trajectory]:
        """The trajectories of given index rows, in their order, parsed one at a time."""
        for row in rows:
            shared = self._index.contributors(row.id) if row.contributions > 1 else None
            yield self._record(row, shared)

    def iter_records(
        self, query: DatasetQuery | None = None, sampling: SamplingConfig | None = None
    ) -> Iterator[Trajectory]:
        """The selected trajectories, in canonical (or sampled) order."""
        return self.records_of(self.metadata(query, sampling))

    def iter_examples(
        self,
        query: DatasetQuery | None = None,
        view: TrainingView | str = TrainingView.FULL_TRAJECTORY,
        sampling: SamplingConfig | None = None,
    ) -> Iterator[Example]:
        """The selected trajectories as examples of `view`."""
        return self.examples_of(self.metadata(query, sampling), view)

    def examples_of(
        self, rows: list[IndexRow], view: TrainingView | str = TrainingView.FULL_TRAJECTORY
    ) -> Iterator[Example]:
        """Given index rows as examples of `view`; rows without a trainable decision are skipped."""
        chosen = coerce(TrainingView, view, "view")
        records = self.records_of([row for row in rows if row.targets])
        if chosen is TrainingView.FULL_TRAJECTORY:
            yield from map(full_trajectory, records)
        else:
            for record in records:
                yield from assistant_turns(record)

    def iter_batches(
        self,
        size: int,
        query: DatasetQuery | None = None,
        view: TrainingView | str = TrainingView.FULL_TRAJECTORY,
        sampling: SamplingConfig | None = None,
    ) -> Iterator[list[Example]]:
        """Examples in lists of at most `size` (the last may be shorter)."""
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise LibraryError("size", f"a batch size must be a positive integer, got {size!r}")
        batch: list[Example] = []
        for example in self.iter_examples(query, view, sampling):
            batch.append(example)
            if len(batch) == size:
                yield batch
                batch = []
        if batch:
            yield batch

    def get_trajectory(self, trajectory_id: str) -> Trajectory:
        """One trajectory by id (contributors included), or a LibraryError."""
        row = self._index.row(trajectory_id)
        if row is None:
            raise LibraryError(self.path, f"holds no trajectory {trajectory_id!r}")
        return self._record(row, self._index.contributors(trajectory_id))

    def group_counts(self, column: str) -> dict[str, int]:
        """Trajectories per split, outcome, quality_tier, provenance or scenario."""
        return self._index.group_counts(column)

    def routes(self, trajectory_id: str) -> list[str]:
        """The coaching routes a trajectory went through."""
        return self._index.routes(trajectory_id)

    def alternatives(self, task_key: str, environment_key: str | None = None) -> list[Trajectory]:
        """Every trajectory of a task (in one environment, if given), best first."""
        query = DatasetQuery(
            task_keys=(task_key,),
            environment_keys=() if environment_key is None else (environment_key,),
        )
        rows = sorted(self.metadata(query), key=lambda row: (row.task_rank, row.id))
        return list(self.records_of(rows))

    def evaluation_bundle(self, task_key: str) -> EvaluationBundle:
        """A task's reference trajectory and attempts, for evaluation."""
        rows = sorted(
            self.metadata(DatasetQuery(task_keys=(task_key,))),
            key=lambda row: (row.task_rank, row.id),
        )
        if not rows:
            raise LibraryError(self.path, f"holds no task {task_key!r}")
        best = next((row for row in rows if row.outcome == Outcome.SUCCESS), None)
        reference = self.get_trajectory(best.id) if best is not None else None
        task = (reference or next(self.records_of(rows[:1]))).task
        outcomes: dict[str, int] = {}
        for row in rows:
            outcomes[row.outcome] = outcomes.get(row.outcome, 0) + 1
        return EvaluationBundle(
            task_key=task_key,
            task=task,
            split=rows[0].split,
            environment_keys=sorted({row.environment_key for row in rows}),
            reference=reference,
            attempts=rows,
            outcomes=dict(sorted(outcomes.items())),
        )

    def as_torch_iterable(
        self,
        query: DatasetQuery | None = None,
        view: TrainingView | str = TrainingView.FULL_TRAJECTORY,
        sampling: SamplingConfig | None = None,
    ) -> Any:
        """A `torch.utils.data.IterableDataset` of example dicts (needs the `torch` extra).

        DataLoader workers split the selected rows by index (worker k takes every n-th
        row from k), so together they yield each example once.
        """
        from gencoach.library.loaders import torch_iterable

        chosen = coerce(TrainingView, view, "view")
        return torch_iterable(self.path, self.metadata(query, sampling), chosen)
