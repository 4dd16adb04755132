"""Fixtures for export tests: a source folder of saves, and exports run on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gencoach.export import ExportOutcome, ExportSettings, run_export
from tests.support.exports import Export, run_demo
from tests.support.rows import rows_trainers_can_trust  # noqa: F401 - an autouse fixture


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """An empty folder to write saves into; exports go to its `datasets/`."""
    folder = tmp_path / "output"
    folder.mkdir()
    return folder


@pytest.fixture
def export(source: Path) -> Export:
    """Run an export of `source` with the given format and settings; messages are collected."""

    def run(fmt: str = "chat", messages: list[str] | None = None, **settings: Any) -> ExportOutcome:
        sink = messages if messages is not None else []
        return run_export(ExportSettings(source=source, format=fmt, **settings), report=sink.append)

    return run


@pytest.fixture(scope="session")
def demo_saves(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The saves of a default `gencoach demo` run: four tasks, two environments each."""
    return run_demo(tmp_path_factory.mktemp("demo"))
