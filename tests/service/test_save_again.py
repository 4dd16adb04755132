"""A run queued while its save is on its way (its requests ended meanwhile) is saved once
more after it: the save on disk ends with what the run's end decided, not with what the
first save read."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from redis.asyncio import Redis

from gencoach.constants import Keys
from gencoach.limits import StageLimits
from gencoach.service.saving.persist import Persister
from gencoach.service.saving.saves import SaveLoop
from gencoach.service.store.graphstore import GraphStore
from tests.support.graphs import known_events


class _HeldPersister(Persister):
    """A persister whose first save waits for `release` before it reads the run."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.release = anyio.Event()
        self.entered = anyio.Event()
        self.second = anyio.Event()
        self.saves = 0

    async def save(self, run_id: str) -> Path | None:
        self.saves += 1
        if self.saves == 1:
            self.entered.set()
            await self.release.wait()
        folder = await super().save(run_id)
        if self.saves == 2:
            self.second.set()
        return folder


@pytest.mark.asyncio
async def test_a_run_queued_while_its_save_runs_is_saved_again(
    async_redis: Redis, tmp_path: Path
) -> None:
    """Queued again while its first save runs: it is saved a second time once the first is
    written (a queue while nothing is on its way saves once, as before)."""
    keys = Keys()
    store = GraphStore(async_redis, keys)
    persister = _HeldPersister(store, StageLimits(async_redis, keys), tmp_path, 60)
    await store.apply(known_events("again", finished=True))
    saves = SaveLoop(store, persister)
    async with anyio.create_task_group() as tg:
        await tg.start(saves.run, tg)
        await saves.queue("again")
        with anyio.fail_after(20):
            await persister.entered.wait()
        await saves.queue("again")  # on its way: saved once more after
        persister.release.set()
        with anyio.fail_after(20):
            await persister.second.wait()
            await saves.close()
        tg.cancel_scope.cancel()
    assert persister.saves == 2
    assert (tmp_path / "again" / "config.json").is_file()
