"""`CanonicalDatasetAdapter`: the consumer side of a library, read-only.

It checks `manifest.json` (format version, file hashes), opens `index.sqlite` read-only
and parses payloads one trajectory at a time, only for the rows a query selected, from
the shards or from a content overlay. It imports no source parser and writes nothing.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from gencoach.library.errors import LibraryError, MissingTrajectoryContentError
from gencoach.library.evaluation import EvaluationBundle, EvaluationReference
from gencoach.library.index import IndexReader
from gencoach.library.layout import API_VERSION, INDEX_FILE
from gencoach.library.manifest import Manifest, read_manifest, verify_files
from gencoach.library.metadata import DatasetRecord, PermissionRecord, TrajectoryMetadata
from gencoach.library.overlays import OverlayEntry, read_entry, scan_overlay
from gencoach.library.prefixes import PrefixReader
from gencoach.library.query import DatasetQuery, TrainingView, coerce
from gencoach.library.records import ContentAvailability, Contributor, Trajectory
from gencoach.library.sampling import SamplingConfig, sample
from gencoach.library.views import Example, assistant_turns, full_trajectory


def _missing(rows: Iterable[TrajectoryMetadata]) -> None:
    absent = [row.source_id for row in rows if row.content_availability == "metadata_only"]
    if absent:
        raise MissingTrajectoryContentError(absent)


class CanonicalDatasetAdapter:
    """A persisted trajectory library, for training and evaluation jobs.

    `content_overlays` maps a source id to a canonical `.jsonl` file (or a folder of
    them) holding the payloads of a source the library indexes metadata-only.
    """

    api_version = API_VERSION

    def __init__(
        self,
        path: str | Path,
        *,
        verify_hashes: bool = True,
        content_overlays: Mapping[str, str | Path] | None = None,
    ) -> None:
        self.path = Path(path)
        self.manifest: Manifest = read_manifest(self.path)
        verify_files(self.path, self.manifest, hashes=verify_hashes)
        self._index = IndexReader(self.path / INDEX_FILE)
        self._shards: dict[str, int] = {}  # shard → open file descriptor
        self._overlay: dict[str, OverlayEntry] = {}
        self._prefixes = PrefixReader()
        self.content_overlays = {
            key: Path(value) for key, value in (content_overlays or {}).items()
        }
        for source_id, overlay in self.content_overlays.items():
            absent = {
                row.trajectory_id
                for row in self._index.select(DatasetQuery(source_ids=(source_id,)))
                if not row.shard
            }
            found = scan_overlay(overlay, absent)
            self._overlay.update(found)
            self._index.add_overlay(found)

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

    # The inventory: what the index lists, whether or not its payload is readable.

    def available_benchmarks(self) -> list[str]:
        """Every benchmark family the library indexes."""
        return self._index.distinct("benchmark")

    def available_sources(self) -> list[str]:
        """Every source id the library indexes (the complete inventory)."""
        return self._index.distinct("source_id")

    def available_curated_selections(self) -> list[str]:
        """Every curated selection a source named for its records."""
        return self._index.distinct("selection")

    def content_sources(self) -> list[str]:
        """The sources whose payloads are readable now: hosted, or given an overlay."""
        return [
            source
            for source in self.available_sources()
            if self.content_availability(source) != ContentAvailability.METADATA_ONLY
        ]

    def content_availability(self, source_id: str) -> str:
        """`hosted`, `overlay` (metadata-only, an overlay given) or `metadata_only`."""
        content = self._index.source_content().get(source_id)
        if content is None:
            raise LibraryError(self.path, f"indexes no source {source_id!r}")
        if content == ContentAvailability.HOSTED:
            return ContentAvailability.HOSTED.value
        if source_id in self.content_overlays:
            return ContentAvailability.OVERLAY.value
        return ContentAvailability.METADATA_ONLY.value

    def permissions(self, source_id: str) -> PermissionRecord:
        """A source's permission audit (`unknown` throughout when none was given)."""
        if source_id not in self._index.source_content():
            raise LibraryError(self.path, f"indexes no source {source_id!r}")
        return self._index.permissions(source_id)

    # Selecting.

    def select(
        self, query: DatasetQuery | None = None, sampling: SamplingConfig | None = None
    ) -> list[TrajectoryMetadata]:
        """The selected rows as a list (what `metadata` iterates)."""
        rows = self._index.select(query or DatasetQuery())
        return rows if sampling is None else sample(rows, sampling)

    def metadata(
        self, query: DatasetQuery | None = None, sampling: SamplingConfig | None = None
    ) -> Iterator[TrajectoryMetadata]:
        """The selected trajectories' metadata, from the index only (payload or not)."""
        return iter(self.select(query, sampling))

    def _read(self, shard: str, offset: int, length: int) -> bytes:
        descriptor = self._shards.get(shard)
        if descriptor is None:
            descriptor = self._shards[shard] = os.open(self.path / shard, os.O_RDONLY)
        # One positioned read per record: no buffer to refill, nothing mapped in memory.
        data = os.pread(descriptor, length, offset)
        if len(data) != length:
            raise LibraryError(self.path / shard, f"ends before the record at byte {offset}")
        return data

    def _payload(self, row: TrajectoryMetadata) -> dict[str, Any]:
        payload: dict[str, Any]
        if row.shard:
            shard = row.shard
            payload = json.loads(self._read(shard, row.offset, row.length))
            payload = self._prefixes.complete(
                shard, payload, lambda offset, length: self._read(shard, offset, length)
            )
        elif row.trajectory_id in self._overlay:
            payload = json.loads(read_entry(self._overlay[row.trajectory_id]))
        else:
            raise MissingTrajectoryContentError([row.source_id])
        if payload.get("id") != row.trajectory_id:
            raise LibraryError(self.path, f"the payload read for {row.trajectory_id} is another")
        return payload

    def _record(self, row: TrajectoryMetadata) -> DatasetRecord:
        payload = self._payload(row)
        if row.contributions > 1:
            contributors = self._index.contributors(row.trajectory_id)
        else:
            own = Contributor(
                row.contributing_trajectory_ids[0],
                payload["source_id"],
                payload["source_revision"],
                payload["locator"],
            )
            contributors = (own,)
        trajectory = Trajectory.from_payload(
            payload,
            split=row.split,
            rank=row.quality_rank,
            task_rank=row.task_rank,
            contributors=contributors,
        )
        return DatasetRecord(row, trajectory)

    def records_of(self, rows: list[TrajectoryMetadata]) -> Iterator[DatasetRecord]:
        """The records of given rows, in their order, parsed one at a time.

        Raises MissingTrajectoryContentError before reading any when a payload is absent.
        """
        _missing(rows)
        return map(self._record, rows)

    def iter_records(
        self, query: DatasetQuery | None = None, sampling: SamplingConfig | None = None
    ) -> Iterator[DatasetRecord]:
        """The selected records, in canonical (or sampled) order."""
        return self.records_of(self.select(query, sampling))

    def iter_examples(
        self,
        query: DatasetQuery | None = None,
        view: TrainingView | str = TrainingView.FULL_TRAJECTORY,
        sampling: SamplingConfig | None = None,
    ) -> Iterator[Example]:
        """The selected trajectories as examples of `view`."""
        return self.examples_of(self.select(query, sampling), view)

    def examples_of(
        self,
        rows: list[TrajectoryMetadata],
        view: TrainingView | str = TrainingView.FULL_TRAJECTORY,
    ) -> Iterator[Example]:
        """Given rows as examples of `view`; rows without a trainable decision are skipped."""
        chosen = coerce(TrainingView, view, "view")
        records = self.records_of([row for row in rows if row.targets])
        return self._examples(records, chosen)

    @staticmethod
    def _examples(records: Iterator[DatasetRecord], view: TrainingView) -> Iterator[Example]:
        if view is TrainingView.FULL_TRAJECTORY:
            for record in records:
                yield full_trajectory(record.trajectory)
        else:
            for record in records:
                yield from assistant_turns(record.trajectory)

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
        examples = self.iter_examples(query, view, sampling)
        return self._batches(examples, size)

    @staticmethod
    def _batches(examples: Iterator[Example], size: int) -> Iterator[list[Example]]:
        batch: list[Example] = []
        for example in examples:
            batch.append(example)
            if len(batch) == size:
                yield batch
                batch = []
        if batch:
            yield batch

    def get_trajectory(self, trajectory_id: str) -> DatasetRecord:
        """One record by its canonical id, or by the id of a source trajectory collapsed
        into it (`contributing_trajectory_ids`); a LibraryError when there is none."""
        row = self._index.row(trajectory_id)
        if row is None:
            raise LibraryError(self.path, f"holds no trajectory {trajectory_id!r}")
        _missing([row])
        return self._record(row)

    def group_counts(self, column: str) -> dict[str, int]:
        """Trajectories per split, outcome, quality_tier, provenance, scenario, benchmark
        or source_id."""
        return self._index.group_counts(column)

    def routes(self, trajectory_id: str) -> list[str]:
        """The coaching routes a trajectory went through."""
        return self._index.routes(trajectory_id)

    def alternatives(
        self, task_key: str, environment_key: str | None = None
    ) -> list[DatasetRecord]:
        """Every record of a task (in one environment, if given), best first."""
        query = DatasetQuery(
            task_keys=(task_key,),
            environment_keys=() if environment_key is None else (environment_key,),
        )
        rows = sorted(self.select(query), key=lambda row: (row.task_rank, row.trajectory_id))
        return list(self.records_of(rows))

    def evaluation_bundle(
        self, task_key: str, query: DatasetQuery | None = None
    ) -> EvaluationBundle:
        """Every reference the library holds for a task (among those `query` selects)."""
        given = query or DatasetQuery()
        if given.task_keys and task_key not in given.task_keys:
            raise LibraryError("task_key", f"{task_key!r} is not among the query's task_keys")
        rows = sorted(
            self.select(dataclasses.replace(given, task_keys=(task_key,))),
            key=lambda row: (row.task_rank, row.trajectory_id),
        )
        if not rows:
            raise LibraryError(self.path, f"holds no task {task_key!r} the query selects")
        records = list(self.records_of(rows))
        references = [EvaluationReference.of(record) for record in records]
        outcomes: dict[str, int] = {}
        for row in rows:
            outcomes[row.outcome_category] = outcomes.get(row.outcome_category, 0) + 1
        return EvaluationBundle(
            task_key=task_key,
            task=records[0].trajectory.task,
            split=rows[0].split,
            environment_keys=sorted({row.environment_key for row in rows}),
            references=references,
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
        rows = self.select(query, sampling)
        _missing(rows)
        return torch_iterable(self.path, rows, chosen, self.content_overlays)
