"""The concurrency cap shared through Redis, and token usage counted in the metrics there."""

from __future__ import annotations

import anyio
import pytest
import redis.asyncio

from gencoach.constants import Keys
from gencoach.errors import BackendUnavailable
from gencoach.metrics import MetricsRecorder
from gencoach.metrics.catalog import LLM_CALLS, LLM_TOKENS
from gencoach.metrics.exposition import stored
from gencoach.workers.backends import (
    Backend,
    ChatMessage,
    Completion,
    RedisSemaphore,
    make_backend,
)
from tests.support.backends import openai_settings
from tests.support.llm_server import ScriptedLLMServer, delayed, json_reply

PROMPT = [ChatMessage.user("Which decision failed?")]
KEYS = Keys("test")


@pytest.mark.asyncio
async def test_cap_holds_across_backend_objects(
    llm_server: ScriptedLLMServer, aredis: redis.asyncio.Redis
) -> None:
    """With max_concurrency 2, six calls from three 'workers' never have more than 2 in flight."""
    llm_server.script(*[delayed(0.25, json_reply({"ok": 1}))] * 6)
    settings = openai_settings(llm_server.endpoint, max_concurrency=2)
    done: list[Completion] = []

    async def worker() -> None:
        backend = make_backend("coach", settings, aredis, keys=KEYS)
        async with backend, anyio.create_task_group() as tg:
            for _ in range(2):
                tg.start_soon(_call, backend, done)

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(worker)
    assert len(done) == 6
    assert llm_server.max_in_flight == 2
    assert await aredis.exists(KEYS.backend_slots("coach")) == 0  # every slot released


async def _call(backend: Backend, done: list[Completion]) -> None:
    done.append(await backend.complete(PROMPT, schema=None))


@pytest.mark.asyncio
async def test_a_dead_holders_lease_expires(aredis: redis.asyncio.Redis) -> None:
    """A slot whose holder died without releasing frees itself when its lease ends."""
    semaphore = RedisSemaphore(aredis, KEYS.backend_slots("coach"), limit=1, lease_s=0.3)
    assert await semaphore.try_acquire("dead-worker")
    assert not await semaphore.try_acquire("live-worker")
    assert await semaphore.holders() == ["dead-worker"]
    started = anyio.current_time()
    assert await semaphore.acquire("live-worker", wait_s=2.0)
    assert 0.2 <= anyio.current_time() - started < 2.0
    assert await semaphore.holders() == ["live-worker"]


@pytest.mark.asyncio
async def test_a_holder_renews_its_lease_when_every_slot_is_held(
    aredis: redis.asyncio.Redis,
) -> None:
    """Taking a slot again renews the holder's lease, also when the set is full; others
    still wait."""
    semaphore = RedisSemaphore(aredis, KEYS.backend_slots("coach"), limit=2, lease_s=30)
    assert await semaphore.try_acquire("a")
    assert await semaphore.try_acquire("b")
    first = await aredis.zscore(semaphore.key, "a")
    await anyio.sleep(0.01)
    assert await semaphore.try_acquire("a")
    renewed = await aredis.zscore(semaphore.key, "a")
    assert first is not None
    assert renewed is not None
    assert renewed > first
    assert not await semaphore.try_acquire("c")
    assert sorted(await semaphore.holders()) == ["a", "b"]


@pytest.mark.asyncio
async def test_a_free_slot_costs_no_zscore(aredis: redis.asyncio.Redis) -> None:
    """Only a full set asks whether the holder has a slot already."""
    semaphore = RedisSemaphore(aredis, KEYS.backend_slots("coach"), limit=100, lease_s=30)
    takes = 50
    before = await _zscore_calls(aredis)
    for n in range(takes):
        assert await semaphore.try_acquire(f"h{n}")
    # Fewer than one a take (another test on a shared server may ask in the meantime).
    assert await _zscore_calls(aredis) - before < takes


async def _zscore_calls(client: redis.asyncio.Redis) -> int:
    stats = await client.info("commandstats")
    return int(stats.get("cmdstat_zscore", {}).get("calls", 0))


@pytest.mark.asyncio
async def test_release_is_idempotent_and_waiting_is_bounded(
    aredis: redis.asyncio.Redis,
) -> None:
    """Releasing twice is harmless; a waiter gives up after wait_s when no slot frees."""
    semaphore = RedisSemaphore(aredis, KEYS.backend_slots("coach"), limit=1, lease_s=30)
    assert await semaphore.try_acquire("a")
    assert not await semaphore.acquire("b", wait_s=0.1)
    assert await semaphore.release("a")
    assert not await semaphore.release("a")
    assert await semaphore.try_acquire("b")


@pytest.mark.asyncio
async def test_acquire_survives_a_script_flush(aredis: redis.asyncio.Redis) -> None:
    """After SCRIPT FLUSH (as after a restart or failover) the script is reloaded."""
    semaphore = RedisSemaphore(aredis, KEYS.backend_slots("coach"), limit=2, lease_s=30)
    assert await semaphore.try_acquire("a")
    await aredis.script_flush()
    assert await semaphore.try_acquire("b")
    assert sorted(await semaphore.holders()) == ["a", "b"]


@pytest.mark.asyncio
async def test_a_backend_waits_for_a_slot_only_so_long(
    llm_server: ScriptedLLMServer, aredis: redis.asyncio.Redis
) -> None:
    """When every slot stays held, a call fails with BackendUnavailable after slot_wait_s."""
    settings = openai_settings(llm_server.endpoint, max_concurrency=1)
    other = RedisSemaphore(aredis, KEYS.backend_slots("coach"), limit=1, lease_s=30)
    assert await other.try_acquire("busy-worker")
    async with make_backend("coach", settings, aredis, keys=KEYS, slot_wait_s=0.1) as backend:
        with pytest.raises(BackendUnavailable, match="concurrency slots"):
            await backend.complete(PROMPT, schema=None)
    assert llm_server.requests == []


@pytest.mark.asyncio
async def test_usage_is_counted_in_the_metrics(
    llm_server: ScriptedLLMServer, aredis: redis.asyncio.Redis
) -> None:
    """Every completion counts one ok call and its tokens in the process's metrics, which a
    flush adds to the shared metrics hash; no other usage key is written."""
    llm_server.script(json_reply({}, usage=(100, 20)), json_reply({}, usage=(50, 5)))
    settings = openai_settings(llm_server.endpoint)
    metrics = MetricsRecorder(aredis, KEYS.metrics)
    for _ in range(2):
        async with make_backend("coach", settings, aredis, keys=KEYS, metrics=metrics) as backend:
            await backend.complete(PROMPT, schema=None)
    assert await aredis.exists(KEYS.metrics) == 0  # counted in memory until the flush
    await metrics.flush()
    series = await stored(aredis, KEYS.metrics)
    assert series[LLM_CALLS.name, ("coach", "ok")] == 2
    assert series[LLM_TOKENS.name, ("coach", "prompt")] == 150
    assert series[LLM_TOKENS.name, ("coach", "completion")] == 25
    assert await aredis.keys("test:backend:coach:*") == []  # the slots released, no usage hash
