"""Every run saves into its own folder, and a failed save is retried until it is written."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from redis.asyncio import Redis

from gencoach.constants import Keys
from gencoach.errors import SaveError
from gencoach.graph import run_folder_name
from gencoach.limits import StageLimits
from gencoach.runtime.retrying import RetryPolicy
from gencoach.service.saving.persist import Persister
from gencoach.service.saving.saves import SaveLoop
from gencoach.service.store.graphstore import GraphStore
from tests.support.graphs import known_events


def test_folder_names_are_injective_and_keep_safe_ids() -> None:
    """Ids that differ only in unsafe characters get different names; safe ids stay as they are."""
    ids = ["coll:T", "coll/T", "coll_T", "coll T", "coll\\T", "..", ".hidden", "a" * 300]
    names = [run_folder_name(run_id) for run_id in ids]
    assert len(set(names)) == len(ids), names
    assert run_folder_name("coll_T") == "coll_T"
    assert run_folder_name("run-1.v2") == "run-1.v2"
    assert run_folder_name("coll:T").startswith("coll_T~")
    assert all("/" not in name and not name.startswith(".") for name in names)
    assert all(len(name) <= 120 for name in names)


def _saved_run_ids(output: Path) -> list[str]:
    return sorted(json.loads((f / "config.json").read_text())["run_id"] for f in output.iterdir())


async def _until_save(store: GraphStore, run_id: str, state: str) -> dict[str, str | int]:
    """Poll the run's summary until its save state is `state` (the caller bounds the wait)."""
    while True:
        summary = await store.summary(run_id)
        if summary is not None and summary["save"] == state:
            return summary
        await anyio.sleep(0.05)


async def _persister(client: Redis, output: Path) -> tuple[GraphStore, Persister]:
    store = GraphStore(client, Keys())
    return store, Persister(store, StageLimits(client, Keys()), output, 60)


@pytest.mark.asyncio
async def test_runs_differing_in_unsafe_characters_keep_their_own_saves(
    async_redis: Redis, tmp_path: Path
) -> None:
    """`coll:T` and `coll/T` are saved into two folders, each naming its own run."""
    store, persister = await _persister(async_redis, tmp_path)
    for run_id in ("coll:T", "coll/T"):
        await store.apply(known_events(run_id, finished=True))
        await persister.save(run_id)
    assert _saved_run_ids(tmp_path) == ["coll/T", "coll:T"]


@pytest.mark.asyncio
async def test_a_save_never_overwrites_another_runs_folder(
    async_redis: Redis, tmp_path: Path
) -> None:
    """A folder already holding another run's save is refused, and left as it was."""
    store, persister = await _persister(async_redis, tmp_path)
    await store.apply(known_events("mine", finished=True))
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"run_id": "theirs"}))
    with pytest.raises(SaveError, match="holds the save of run 'theirs'"):
        await persister.save("mine")
    assert json.loads((folder / "config.json").read_text()) == {"run_id": "theirs"}
    assert await store.state("mine") == "finished"


@pytest.mark.asyncio
async def test_a_failed_save_is_retried_and_shown_until_it_succeeds(
    async_redis: Redis, tmp_path: Path
) -> None:
    """While the folder cannot be written the run shows `retrying` with why; then it is saved."""
    store, persister = await _persister(async_redis, tmp_path)
    await store.apply(known_events("stuck", finished=True))
    blocker = tmp_path / "stuck"
    blocker.write_text("not a folder")
    saves = SaveLoop(store, persister, RetryPolicy(timeout_s=None, wait_initial_s=0.05))
    async with anyio.create_task_group() as tg:
        await tg.start(saves.run, tg)
        await saves.queue("stuck")
        with anyio.fail_after(20):
            summary = await _until_save(store, "stuck", "retrying")
        assert "stuck" in str(summary["save_error"])
        assert summary["state"] == "finished"
        blocker.unlink()
        with anyio.fail_after(20):
            summary = await _until_save(store, "stuck", "saved")
        assert (tmp_path / "stuck" / "config.json").is_file()
        assert "save_error" not in summary
        await saves.close()
        tg.cancel_scope.cancel()
