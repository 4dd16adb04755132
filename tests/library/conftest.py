"""Fixtures for library tests: sources on disk and a library built from them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gencoach.library import CanonicalDatasetAdapter
from gencoach.library.build import build_library
from tests.library.sources import coached_save, human_save, magma_save
from tests.support.rows import rows_trainers_can_trust  # noqa: F401 - an autouse fixture


@pytest.fixture
def saves(tmp_path: Path) -> Path:
    """A folder of five saves over four tasks, in both save dialects."""
    root = tmp_path / "saves"
    coached_save(root / "run-1", "run-1", "sw0-sw4")
    coached_save(root / "run-2", "run-2", "sw1-sw2")
    coached_save(root / "run-3", "run-3", "sw3-sw5")
    magma_save(root / "magma-1")
    human_save(root / "human-1")
    return root


@pytest.fixture
def library(saves: Path, tmp_path: Path) -> Iterator[CanonicalDatasetAdapter]:
    """A library built from `saves`, open."""
    build_library([saves], tmp_path / "lib", "r1")
    adapter = CanonicalDatasetAdapter(tmp_path / "lib")
    yield adapter
    adapter.close()
