"""The runs index repaired from the runs' own state: entries lost or out of date (a crash
between a run's write and the index's), the index of earlier versions, expired saves."""

from __future__ import annotations

import anyio
import pytest
from redis.asyncio import Redis

from gencoach.constants import Keys
from gencoach.service.recovery.housekeeping import Housekeeper
from gencoach.service.store.graphstore import META, GraphStore
from gencoach.service.store.runindex import RunQuery
from tests.support.graphs import known_events

KEYS = Keys()


async def _index_keys(client: Redis) -> list[bytes]:
    return [key async for key in client.scan_iter(match=f"{KEYS.prefix}:runs:*")]


@pytest.mark.asyncio
async def test_a_lost_index_is_rebuilt_by_housekeeping_from_the_runs_keys(
    async_redis: Redis,
) -> None:
    """With every index key gone, a housekeeping pass indexes each run again in its state."""
    store = GraphStore(async_redis, KEYS)
    await store.apply(known_events("open"))
    await store.apply(known_events("done", finished=True))
    await async_redis.delete(*await _index_keys(async_redis))
    assert await store.index.counts() == {"active": 0, "finished": 0, "saved": 0}

    await Housekeeper(async_redis, KEYS, saved_ttl_s=60, every_s=1).pass_once()

    assert await store.index.counts() == {"active": 1, "finished": 1, "saved": 0}
    page = await store.index.page(RunQuery(state="finished"))
    assert [run.run_id for run in page.runs] == ["done"]


@pytest.mark.asyncio
async def test_an_entry_left_behind_its_run_is_repaired_and_a_vanished_run_dropped(
    async_redis: Redis,
) -> None:
    """An entry still active for a finished run moves to finished at the next check; the
    entry of a run whose keys vanished (not by expiry) leaves the index."""
    store = GraphStore(async_redis, KEYS)
    await store.apply(known_events("behind"))
    await store.apply(known_events("vanished"))
    await async_redis.hset(KEYS.run("behind", META), "state", "finished")  # index not told
    await async_redis.delete(KEYS.run("vanished", META))

    assert await store.index.check_slice() == 2

    assert await store.index.counts() == {"active": 0, "finished": 1, "saved": 0}
    assert await store.index.run_ids() == ["behind"]


@pytest.mark.asyncio
async def test_a_saved_run_leaves_the_counts_when_its_keys_expire(async_redis: Redis) -> None:
    """The counts drop an expired save at the next read, before any pass runs."""
    store = GraphStore(async_redis, KEYS)
    await store.apply(known_events("short", finished=True))
    await store.apply(known_events("kept", finished=True))
    await store.mark_saved("short", "saves/short", ttl_s=60)
    await store.mark_saved("kept", "saves/kept", ttl_s=60)
    assert await store.index.counts() == {"active": 0, "finished": 0, "saved": 2}
    # Saved again with a second to live only now: the count above saw both however slow
    # the machine; a slow one only makes the expiry below surer.
    await store.mark_saved("short", "saves/short", ttl_s=1)

    await anyio.sleep(1.2)

    assert await store.index.counts() == {"active": 0, "finished": 0, "saved": 1}
    page = await store.index.page(RunQuery())
    assert [run.run_id for run in page.runs] == ["kept"]
    assert page.total == 1
