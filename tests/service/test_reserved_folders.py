"""A run whose id names a folder gencoach writes beside the saves gets a folder of its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from redis.asyncio import Redis

from gencoach.constants import Keys
from gencoach.export.destination import DATASETS_DIR
from gencoach.graph import run_folder_name
from gencoach.graph.writer import RESERVED_FOLDERS
from gencoach.limits import StageLimits
from gencoach.service.saving.persist import Persister
from gencoach.service.store.graphstore import GraphStore
from tests.support.graphs import known_events


def test_the_export_folder_is_reserved_in_any_case() -> None:
    """`datasets` (export's default folder) and `DataSets` never name a save folder."""
    assert DATASETS_DIR in RESERVED_FOLDERS
    names = {run_folder_name(run_id) for run_id in ("datasets", "DataSets", "datasets~x")}
    assert len(names) == 3
    assert all(name.lower() != DATASETS_DIR for name in names)
    assert run_folder_name("datasets").startswith("datasets~")


def _saves(output: Path) -> dict[Path, list[str]]:
    """Each save folder under `output` with the files it holds."""
    return {
        path: sorted(str(item.relative_to(path)) for item in path.rglob("*"))
        for path in output.iterdir()
        if (path / "config.json").is_file()
    }


def _export(output: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gencoach", "export", str(output), "--format", "chat",
         "--any-agent"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert (output / DATASETS_DIR).is_dir()


@pytest.mark.asyncio
async def test_a_run_named_datasets_survives_a_default_export_beside_it(
    async_redis: Redis, tmp_path: Path
) -> None:
    """A run named `datasets` is saved beside the export's folder, not in it, and
    `gencoach export OUTPUT --format chat --any-agent` (default destination) exports
    without writing into its save."""
    store = GraphStore(async_redis, Keys())
    persister = Persister(store, StageLimits(async_redis, Keys()), tmp_path, 60)
    await store.apply(known_events("datasets", finished=True))
    await persister.save("datasets")
    before = _saves(tmp_path)
    (folder,) = before
    assert folder.name != DATASETS_DIR
    assert json.loads(await anyio.Path(folder / "config.json").read_text())["run_id"] == (
        "datasets"
    )
    await anyio.to_thread.run_sync(_export, tmp_path)
    assert _saves(tmp_path) == before
