"""A query's examples written out as JSONL, for training jobs that want files.

`write_examples` writes them as chat rows (`chat_row`) or in a view's shape. See
docs/library.md (`query --output`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gencoach.export.writer import encode_row, partial_file
from gencoach.library.adapter import CanonicalDatasetAdapter
from gencoach.library.errors import LibraryError
from gencoach.library.metadata import TrajectoryMetadata
from gencoach.library.query import TrainingView, coerce
from gencoach.library.views import Example, FullTrajectoryExample

CHAT = "chat"


def chat_row(example: FullTrajectoryExample) -> dict[str, Any]:
    """A full example as a chat row, in the shape the chat source reads back: `messages`
    (each assistant message `trainable` as the loss mask says), `tools` and `metadata`
    (the full view's, lineage included)."""
    messages = [
        {**message, "trainable": bool(bit)} if message["role"] == "assistant" else message
        for message, bit in zip(example.model_input, example.loss_mask, strict=True)
    ]
    return {"messages": messages, "tools": example.tools, "metadata": example.metadata}


def write_examples(
    lib: CanonicalDatasetAdapter, rows: list[TrajectoryMetadata], output: Path, shape: str
) -> int:
    """Write the examples of `rows` to `output` in `shape`; how many were written.

    `shape` is `chat`, or a view (`full_trajectory`, `assistant_turn`) whose examples'
    `to_dict()` are written. The file is written beside its destination and renamed into
    place when complete, as an export writes its files; a path inside the library is
    refused, so reading never writes the library.
    """
    view = TrainingView.FULL_TRAJECTORY if shape == CHAT else coerce(TrainingView, shape, "format")
    if output.resolve().is_relative_to(lib.path.resolve()):
        raise LibraryError(output, "is inside the library, which is never written")
    written = 0
    try:
        with partial_file(output) as partial:
            example: Example
            for example in lib.examples_of(rows, view):
                data = chat_row(example) if shape == CHAT else example.to_dict()  # type: ignore[arg-type]
                partial.write(encode_row(data))
                written += 1
    except OSError as error:
        raise LibraryError(output, f"cannot be written: {error.strerror}") from None
    return written
