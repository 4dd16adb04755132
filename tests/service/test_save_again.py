"""A run's requests that move after its save (its end ended them) are written into the save
again: its requests file only, so a reader never finds the save half written."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from redis.asyncio import Redis

from gencoach.constants import Keys
from gencoach.graph.writer import REQUESTS_FILE
from gencoach.limits import StageLimits
from gencoach.service.saving.persist import Persister
from gencoach.service.saving.saves import SaveLoop
from gencoach.service.store.graphstore import GraphStore
from tests.support.graphs import known_events

LATE: dict[str, Any] = {"request_id": "again:9:failure", "history": [], "state": "unproven"}


class _HeldPersister(Persister):
    """A persister whose first save, once written, waits for `release` before it ends."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.release = anyio.Event()
        self.written = anyio.Event()
        self.saves = 0

    async def save(self, run_id: str) -> Path | None:
        self.saves += 1
        folder = await super().save(run_id)
        if self.saves == 1:
            self.written.set()
            await self.release.wait()
        return folder


@asynccontextmanager
async def _first_save(
    async_redis: Redis, tmp_path: Path, run_id: str
) -> AsyncIterator[tuple[SaveLoop, _HeldPersister]]:
    """A save loop whose first save, of the finished run `run_id`, is written (and held
    until `release`); the loop is closed on the way out."""
    keys = Keys()
    store = GraphStore(async_redis, keys)
    persister = _HeldPersister(store, StageLimits(async_redis, keys), tmp_path, 60)
    await store.apply(known_events(run_id, finished=True))
    saves = SaveLoop(store, persister)
    async with anyio.create_task_group() as tg:
        await tg.start(saves.run, tg)
        await saves.queue(run_id)
        with anyio.fail_after(20):
            await persister.written.wait()
        yield saves, persister
        persister.release.set()
        await saves.close()
        tg.cancel_scope.cancel()


def _saved_ids(folder: Path) -> list[str]:
    saved = json.loads((folder / REQUESTS_FILE).read_text())
    return [request["request_id"] for request in saved["requests"]]


@pytest.mark.asyncio
async def test_requests_that_move_while_the_save_is_written_are_written_after_it(
    async_redis: Redis, tmp_path: Path
) -> None:
    """They moved after the save read them: once the save is written, its requests file
    is written again, and the run is not saved a second time."""
    async with _first_save(async_redis, tmp_path, "again") as (saves, persister):
        assert _saved_ids(tmp_path / "again") == []
        await async_redis.hset(
            Keys().run("again", "requests"), str(LATE["request_id"]), json.dumps(LATE)
        )
        await saves.requests_moved("again")  # its save is on its way: written after it
        assert _saved_ids(tmp_path / "again") == []
    assert _saved_ids(tmp_path / "again") == [LATE["request_id"]]
    assert persister.saves == 1
    assert json.loads((tmp_path / "again" / "config.json").read_text())["export_complete"]


@pytest.mark.asyncio
async def test_requests_of_a_saved_run_are_written_at_once_and_an_unsaved_run_is_left(
    async_redis: Redis, tmp_path: Path
) -> None:
    """Nothing on its way: a saved run's requests file is written now; a run not saved yet
    gets no folder (its save will hold its requests)."""
    keys = Keys()
    store = GraphStore(async_redis, keys)
    persister = Persister(store, StageLimits(async_redis, keys), tmp_path, 60)
    await store.apply(known_events("saved", finished=True))
    await store.apply(known_events("later", finished=True))
    await persister.save("saved")
    saves = SaveLoop(store, persister)
    async with anyio.create_task_group() as tg:
        await tg.start(saves.run, tg)
        for run_id in ("saved", "later"):
            late = {**LATE, "request_id": f"{run_id}:9:failure"}
            key = keys.run(run_id, "requests")
            await async_redis.hset(key, str(late["request_id"]), json.dumps(late))
            await saves.requests_moved(run_id)
        await saves.close()
    assert _saved_ids(tmp_path / "saved") == ["saved:9:failure"]
    assert not (tmp_path / "later").exists()


@pytest.mark.asyncio
async def test_a_run_queued_again_after_its_save_is_not_rewritten(
    async_redis: Redis, tmp_path: Path
) -> None:
    """A reconciliation pass read the run finished just before its save was written, and
    queued it after: the loop finds it saved and leaves the folder a reader may be reading
    as it is, instead of writing it again (its config incomplete meanwhile)."""
    async with _first_save(async_redis, tmp_path, "twice") as (saves, persister):
        persister.release.set()
        assert await GraphStore(async_redis, Keys()).state("twice") == "saved"
        config = tmp_path / "twice" / "config.json"
        written_ns = config.stat().st_mtime_ns
        await saves.queue("twice")
    assert persister.saves == 1
    assert config.stat().st_mtime_ns == written_ns
