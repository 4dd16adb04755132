"""Framework adapters; torch is imported only when one is asked for."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from gencoach.library.errors import LibraryError
from gencoach.library.metadata import TrajectoryMetadata
from gencoach.library.query import TrainingView

T = TypeVar("T")


def worker_share(items: Sequence[T], worker: int, workers: int) -> list[T]:
    """The items worker `worker` of `workers` takes: every `workers`-th from its index."""
    return list(items[worker::workers])


def torch_iterable(
    library: Path,
    rows: list[TrajectoryMetadata],
    view: TrainingView,
    overlays: Mapping[str, Path],
) -> Any:
    """An IterableDataset over `rows` as `view` examples (plain dicts).

    Each iteration opens the library afresh (sizes checked, hashes already were), so a
    DataLoader worker never shares the parent's SQLite connection or file handles.
    """
    try:
        from torch.utils.data import IterableDataset, get_worker_info  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        raise LibraryError(
            "torch",
            "as_torch_iterable needs PyTorch: pip install 'gencoach[torch]'",
        ) from None

    class LibraryIterable(IterableDataset):  # type: ignore[misc]
        """Selected library examples; each DataLoader worker takes its share of the rows."""

        def __init__(self) -> None:
            super().__init__()
            self.library = library
            self.rows = rows
            self.view = view
            self.overlays = dict(overlays)

        def __iter__(self) -> Iterator[dict[str, Any]]:
            info = get_worker_info()
            share = (
                self.rows if info is None else worker_share(self.rows, info.id, info.num_workers)
            )
            from gencoach.library.adapter import CanonicalDatasetAdapter

            with CanonicalDatasetAdapter(
                self.library, verify_hashes=False, content_overlays=self.overlays
            ) as adapter:
                for example in adapter.examples_of(share, self.view):
                    yield example.to_dict()

    return LibraryIterable()
