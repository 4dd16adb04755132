"""A query's examples written out as JSONL, for training jobs that want files.

- `chat`: one row per trajectory with a trainable decision, in the shape the chat
  source reads back: `messages` (assistant messages flagged `trainable` as the loss
  mask says), `tools` and `metadata` (the full view's, lineage included);
- `full_trajectory` / `assistant_turn` (or `full` / `turn`): each example's `to_dict()`.

The file is written beside its destination and renamed into place when complete; a
path inside the library is refused, so reading never writes the library.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from gencoach.library.adapter import CanonicalDatasetAdapter
from gencoach.library.errors import LibraryError
from gencoach.library.metadata import TrajectoryMetadata
from gencoach.library.query import TrainingView, coerce
from gencoach.library.views import Example, FullTrajectoryExample

CHAT = "chat"


def chat_row(example: FullTrajectoryExample) -> dict[str, Any]:
    """A full example as a chat row (`trainable` on each assistant message)."""
    messages = [
        {**message, "trainable": bool(bit)} if message["role"] == "assistant" else message
        for message, bit in zip(example.model_input, example.loss_mask, strict=True)
    ]
    return {"messages": messages, "tools": example.tools, "metadata": example.metadata}


def write_examples(
    lib: CanonicalDatasetAdapter, rows: list[TrajectoryMetadata], output: Path, shape: str
) -> int:
    """Write the examples of `rows` to `output` in `shape`; how many were written."""
    view = TrainingView.FULL_TRAJECTORY if shape == CHAT else coerce(TrainingView, shape, "format")
    if output.resolve().is_relative_to(lib.path.resolve()):
        raise LibraryError(output, "is inside the library, which is never written")
    partial = output.with_name(f".{output.name}.partial")
    written = 0
    try:
        with partial.open("w", encoding="utf-8") as handle:
            example: Example
            for example in lib.examples_of(rows, view):
                data = chat_row(example) if shape == CHAT else example.to_dict()  # type: ignore[arg-type]
                handle.write(json.dumps(data, ensure_ascii=False) + "\n")
                written += 1
        os.replace(partial, output)
    except OSError as error:
        partial.unlink(missing_ok=True)
        raise LibraryError(output, f"cannot be written: {error.strerror}") from None
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return written
