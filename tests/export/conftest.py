"""Fixtures for export tests: a source folder of saves, and exports run on it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gencoach.export import ExportOutcome, ExportSettings, run_export
from tests.support.rows import rows_trainers_can_trust  # noqa: F401 - an autouse fixture

Export = Callable[..., ExportOutcome]


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


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a `.jsonl` file or a `.json` array."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        rows: list[dict[str, Any]] = json.loads(text)
        return rows
    return [json.loads(line) for line in text.splitlines()]


def run_demo(output: Path, *arguments: str) -> Path:
    """Run `gencoach demo` into `output` with `arguments`; the folder of its saves."""
    done = subprocess.run(
        [sys.executable, "-m", "gencoach", "demo", *arguments, "--output", str(output)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, f"gencoach demo failed:\n{done.stdout}\n{done.stderr}"
    (graphs,) = output.glob("*/graphs")
    return graphs


@pytest.fixture(scope="session")
def demo_saves(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The saves of a default `gencoach demo` run: four tasks, two environments each."""
    return run_demo(tmp_path_factory.mktemp("demo"))
