"""Redis stays bounded: streams lose only what every group acknowledged, run keys expire
after the save, and a soak of many runs leaves key count and memory flat."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis
from redis.asyncio import Redis

from gencoach.constants import Keys
from gencoach.reporting.client import Reporter
from gencoach.service.recovery.housekeeping import Housekeeper
from gencoach.service.store.graphstore import META, GraphStore
from tests.support.controller import ControllerProcess, wait_for
from tests.support.graphs import known_events, known_run_events
from tests.support.streams import async_entries, async_read_group

KEYS = Keys()


@pytest.mark.asyncio
async def test_a_stream_keeps_every_entry_some_group_has_not_acknowledged(
    async_redis: Redis,
) -> None:
    """Acknowledged entries go; pending and undelivered ones stay, for every group."""
    stream = KEYS.events
    ids = [await async_redis.xadd(stream, {"n": index}) for index in range(10)]
    await async_redis.xgroup_create(stream, "fast", id="0")
    read = await async_read_group(async_redis, "fast", "c", stream, count=6)
    delivered = [entry_id for entry_id, _ in read]
    await async_redis.xack(stream, "fast", *delivered[:4])
    keeper = Housekeeper(async_redis, KEYS, saved_ttl_s=60, every_s=1)

    assert await keeper.trim(stream) == 4
    assert [entry_id for entry_id, _ in await async_entries(async_redis, stream)] == ids[4:]

    await async_redis.xgroup_create(stream, "slow", id="0")
    await async_redis.xack(stream, "fast", *delivered[4:])
    assert await keeper.trim(stream) == 0  # "slow" has read nothing yet
    assert await async_redis.xlen(stream) == 6


@pytest.mark.asyncio
async def test_keys_written_after_a_save_get_an_expiry(async_redis: Redis) -> None:
    """A log list created after the run was saved expires; an active run's keys do not."""
    store = GraphStore(async_redis, KEYS)
    await store.apply(known_events("done", finished=True))
    await store.apply(known_events("going"))
    await store.mark_saved("done", "output/done", ttl_s=60)
    await async_redis.rpush(KEYS.run("done", "logs"), "late")
    keeper = Housekeeper(async_redis, KEYS, saved_ttl_s=60, every_s=1)

    assert await keeper.expire_leftovers() == 1
    assert 0 < await async_redis.ttl(KEYS.run("done", "logs")) <= 60
    assert await async_redis.ttl(KEYS.run("going", META)) == -1


def _report_round(redis_url: str, prefix: str, count: int) -> None:
    for index in range(count):
        with Reporter(f"{prefix}-{index}", redis_url=redis_url) as report:
            for kind, fields in known_run_events():
                report.emit(kind, **fields)


@pytest.mark.slow
def test_a_soak_leaves_key_count_and_memory_flat(
    controller_factory: Callable[..., ControllerProcess],
    redis_url: str,
    redis_client: redis.Redis,
) -> None:
    """Three rounds of runs, each saved and expired: the same keys, bounded streams, flat memory."""
    controller = controller_factory(saved_ttl_s=1, housekeeping_s=0.5)
    controller.start()
    after: list[tuple[int, int, int]] = []
    for round_number in range(3):
        _report_round(redis_url, f"soak{round_number}", 10)
        # The round's runs are saved first: before the controller reads them, none of their
        # keys exists yet and the wait below would hold vacuously.
        wait_for(
            lambda n=round_number: (
                controller.output_dir.is_dir()
                and len(list(controller.output_dir.iterdir())) == 10 * (n + 1)
            ),
            timeout_s=40,
            what=f"round {round_number}'s runs saved",
        )
        wait_for(
            lambda n=round_number: (
                not redis_client.keys(f"gencoach:run:{{soak{n}-*")
                and redis_client.hlen(KEYS.runs_index("entries")) == 0
            ),
            timeout_s=40,
            what=f"round {round_number}'s run keys expired and left the index",
        )
        wait_for(
            lambda: sum(redis_client.xlen(s) for s in (KEYS.events, KEYS.terminals)) == 0,
            timeout_s=20,
            what="acknowledged stream entries trimmed",
        )
        memory = int(redis_client.info("memory")["used_memory"])
        # KEYS, not DBSIZE: DBSIZE also counts keys whose expiry has passed but which Redis
        # has not reclaimed yet, which on a loaded machine can be a whole round's run keys.
        live_keys = len(redis_client.keys("*"))
        after.append((live_keys, redis_client.xlen(KEYS.events), memory))
    print("after each round (keys, events stream length, used_memory):", after)
    assert len({keys for keys, _, _ in after}) == 1, after
    assert after[2][2] <= after[0][2] * 1.5, after
    assert len(list((controller.output_dir).iterdir())) == 30
