"""Hugging Face datasets of conversations: saved with `save_to_disk`, or parquet files.

`SavedDatasetSource` and `ParquetSource` read rows in the shapes `shapes` knows, their
other columns as metadata. Reading needs the `datasets` package (`pip install
'gencoach[datasets]'`, pyarrow with it); nothing is downloaded and no cache is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from gencoach.library.errors import SourceError
from gencoach.library.sources.base import FileSource, SourceAdapter, SourceContent, files_digest
from gencoach.library.sources.chat import conversation_payload

_EXTRA = "pip install 'gencoach[datasets]'"


def _rows(
    adapter: SourceAdapter, source_id: str, split: str | None, rows: Iterable[dict[str, Any]]
) -> Iterator[dict[str, Any]]:
    for index, row in enumerate(rows):
        locator = {"kind": adapter.kind, "path": adapter.location, "split": split, "row": index}
        try:
            yield conversation_payload(row, source_id, adapter.revision, locator, split)
        except ValueError as error:
            where = f"{split} row {index}" if split else f"row {index}"
            raise SourceError(adapter.location, f"{where}: {error}") from None


class SavedDatasetSource(SourceAdapter):
    """A folder written by `Dataset.save_to_disk` or `DatasetDict.save_to_disk`.

    A `DatasetDict` gives each split's rows, and the split is kept as the record's source
    split (the library still assigns its own split per task).
    """

    kind = "hf-dataset"

    def digest(self) -> str:
        """SHA-256 over every file of the folder, names and bytes."""
        files = sorted(path for path in self.path.rglob("*") if path.is_file())
        return files_digest(self.path, files, self.location)

    def open(self) -> SourceContent:
        """Load the dataset (memory-mapped) and yield a payload per row."""
        try:
            import datasets  # type: ignore[import-untyped, unused-ignore]
        except ImportError:
            raise SourceError(self.location, f"reading a saved dataset needs {_EXTRA}") from None
        try:
            loaded = datasets.load_from_disk(str(self.path))
        except (OSError, ValueError) as error:
            raise SourceError(self.location, f"cannot be loaded as a dataset: {error}") from None
        source_id = f"hf:{self.location}"
        if isinstance(loaded, datasets.DatasetDict):
            parts: list[tuple[str | None, Any]] = [(name, loaded[name]) for name in sorted(loaded)]
        else:
            parts = [(str(loaded.split) if loaded.split else None, loaded)]

        def payloads() -> Iterator[dict[str, Any]]:
            for split, table in parts:
                yield from _rows(self, source_id, split, table)

        return SourceContent(source_id, payloads())


class ParquetSource(FileSource):
    """A parquet file of conversation rows (a dataset's table, as the Hub serves it)."""

    kind = "parquet"

    def open(self) -> SourceContent:
        """Read the table in batches and yield a payload per row."""
        try:
            import pyarrow.parquet as parquet  # type: ignore[import-untyped]
        except ImportError:
            raise SourceError(self.location, f"reading parquet needs {_EXTRA}") from None
        try:
            table = parquet.ParquetFile(self.path)
        except (OSError, ValueError) as error:
            raise SourceError(self.location, f"cannot be read as parquet: {error}") from None
        source_id = f"parquet:{self.location}"

        def rows() -> Iterator[dict[str, Any]]:
            for batch in table.iter_batches(batch_size=1024):
                yield from batch.to_pylist()

        return SourceContent(source_id, _rows(self, source_id, None, rows()))
