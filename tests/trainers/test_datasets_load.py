"""Hugging Face `datasets` loads every file of every format the way trainers load them."""

from __future__ import annotations

from pathlib import Path

import datasets
import pytest

from tests.support.exports import read_rows
from tests.trainers.data import VARIANTS, file_names

# A demo run and the GGUF tokenizer load once per session, inside the first test's budget.
pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_file_loads_with_load_dataset_json(
    exports: dict[str, Path], variant: str, tmp_path: Path
) -> None:
    """`load_dataset("json")` reads the full, train and validation files, every row intact."""
    folder = exports[variant]
    for name in file_names(variant):
        expected = read_rows(folder / name)
        assert expected, f"{variant}/{name} must have rows for this test"
        loaded = datasets.load_dataset(
            "json", data_files=str(folder / name), split="train", cache_dir=str(tmp_path)
        )
        assert loaded.num_rows == len(expected), name


def test_demo_chat_export_loads(demo_graphs: Path, tmp_path: Path) -> None:
    """The chat export of a real demo run loads as one Arrow table, tools and all."""
    from gencoach.export import ExportSettings, run_export

    out = tmp_path / "chat"
    run_export(ExportSettings(source=demo_graphs, format="chat", out=out))
    rows = read_rows(out / "chat.jsonl")
    assert rows, "the demo run must export chat rows"
    loaded = datasets.load_dataset(
        "json", data_files=str(out / "chat.jsonl"), split="train", cache_dir=str(tmp_path)
    )
    assert loaded.num_rows == len(rows)
    assert {"messages", "tools", "run_id", "score", "coached"} <= set(loaded.column_names)
