"""What metrics cost: intake with its counting on against intake counting nothing, and a
`/metrics` scrape's rendering against the plain HGETALL of the same hash.

Intake (consume only, a stream filled beforehand) is timed in alternating rounds with a
recorder that counts and flushes to Redis every second, as the controller's does, and
with one whose counting does nothing. The scrape renders a hash holding every series a
busy deployment would have (every route, state, outcome and reason; three backends).

    .venv/bin/python -m benchmarks.metrics [--runs 400] [--rounds 3] [--redis-url URL]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from typing import Any

import anyio
from redis.asyncio import Redis

from benchmarks.common import FLUSHED_URL_HELP, bench_redis
from benchmarks.intake import _events, _intake
from gencoach.config.scrubbing import scrub
from gencoach.constants import Keys
from gencoach.metrics import Counter, Histogram, MetricsRecorder
from gencoach.metrics import catalog as c
from gencoach.metrics.exposition import render, stored
from gencoach.service.coaching.requests import CoachingRequest, RequestStore
from gencoach.service.coaching.router import SkipCode

ROUTES = ("format", "failure", "no_action", "exceeded", "suboptimal", "text_rewrite")
STATES = ("opportunity", "skipped", "admitted", "queued", "diagnosing", "declined",
          "repairing", "rewriting", "corrected", "abandoned", "error", "reinjected",
          "executed", "proven", "unproven")  # fmt: skip
BACKENDS = ("teacher", "local", "remote")


class Uncounted(MetricsRecorder):
    """A recorder whose counting does nothing: the baseline."""

    def inc(self, counter: Counter, *labels: str, by: float = 1) -> None:
        return None

    def observe(self, histogram: Histogram, seconds: float, *labels: str) -> None:
        return None


async def _timed_intake(client: Redis, events: list[str], counting: bool) -> float:
    await client.flushdb()
    keys = Keys("bench-metrics")
    if not counting:
        return await _intake(client, keys, events, 500, True, Uncounted())
    recorder = MetricsRecorder(client, keys.metrics)
    async with anyio.create_task_group() as tg:

        async def flush_every_second() -> None:
            while True:
                await anyio.sleep(1.0)
                await recorder.flush()

        tg.start_soon(flush_every_second)
        elapsed = await _intake(client, keys, events, 500, True, recorder)
        tg.cancel_scope.cancel()
    return elapsed


def _busy_recorder() -> MetricsRecorder:
    recorder = MetricsRecorder()
    skips: tuple[str, ...] = SkipCode.__args__  # type: ignore[attr-defined]
    for route in ROUTES:
        for reason in skips:
            recorder.inc(c.OPPORTUNITIES, route, "skipped", reason)
        for state in STATES:
            recorder.inc(c.REQUESTS, route, state)
        for outcome in ("branched", "no_anchor", "agent_error", "budget_spent"):
            recorder.inc(c.REINJECTIONS, route, outcome)
    outcomes = ("ok", "unavailable", "refused", "truncated", "error")
    for backend, outcome in itertools.product(BACKENDS, outcomes):
        recorder.inc(c.LLM_CALLS, backend, outcome)
        recorder.observe(c.LLM_SECONDS, 1.5, backend, outcome)
    for kind in ("diagnosis", "repair", "rewrite"):
        recorder.observe(c.JOB_SECONDS, 2.0, kind)
    return recorder


async def _scrape(client: Redis, rounds: int) -> tuple[float, float, int]:
    keys = Keys("bench-scrape")
    recorder = _busy_recorder()
    recorder.client, recorder.key = client, keys.metrics
    await client.delete(keys.metrics)
    await recorder.flush()
    series = await client.hlen(keys.metrics)
    plain: list[float] = []
    rendered: list[float] = []
    for _ in range(rounds * 20):
        started = time.perf_counter()
        await client.hgetall(keys.metrics)
        plain.append(time.perf_counter() - started)
        started = time.perf_counter()
        render(await stored(client, keys.metrics))
        rendered.append(time.perf_counter() - started)
    return statistics.median(plain), statistics.median(rendered), series


def _request(index: int) -> CoachingRequest:
    return CoachingRequest(
        request_id=f"bench:{index}:failure",
        run_id="bench",
        route="failure",
        kind="failure",
        type_coaching="failure:diagnosis",
        candidate_id=index,
        candidate_gen_id=f"c{index}",
        stage_id=0,
        state="opportunity",
    ).moved("opportunity")


async def _saves(client: Redis, count: int) -> tuple[float, float]:
    keys = Keys("bench-saves")
    store = RequestStore(client, keys)
    # A request is stored whole once, as it opens; its later moves are compare-and-sets.
    requests = [_request(index) for index in range(count)]
    key = keys.run("bench", "requests")
    await client.delete(key)
    started = time.perf_counter()
    for request in requests:  # a request's record alone: one HSET of its JSON
        await client.hset(key, request.request_id, scrub(request.model_dump_json()))
    plain_s = time.perf_counter() - started
    await client.delete(key)
    started = time.perf_counter()
    for request in requests:  # its creation, which counts each transition it holds
        await store.create(request)
    counted_s = time.perf_counter() - started
    await client.delete(key)
    return plain_s / count, counted_s / count


async def main(url: str, runs: int, rounds: int) -> None:
    events = _events(runs)
    client: Any = Redis.from_url(url)
    print(f"events: {len(events)} ({runs} runs of 23), consume only, batch 500, redis {url}")
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(rounds):
        for counting in (False, True):
            times[counting].append(await _timed_intake(client, events, counting))
    baseline = len(events) / statistics.median(times[False])
    counted = len(events) / statistics.median(times[True])
    print(f"  intake counting nothing  : {baseline:9.0f} events/s  (baseline)")
    print(f"  intake counting, flushed : {counted:9.0f} events/s")
    print(f"  ratio                    : {counted / baseline:9.3f}")
    plain_s, render_s, series = await _scrape(client, rounds)
    print(f"scrape of {series} stored series:")
    print(f"  HGETALL                  : {plain_s * 1000:9.2f} ms  (baseline)")
    print(f"  HGETALL + render         : {render_s * 1000:9.2f} ms")
    print(f"  ratio                    : {render_s / plain_s:9.1f}")
    hset_s, save_s = await _saves(client, 2000)
    print("request creations (an opening request, about 0.4 KB of JSON):")
    print(f"  HSET                     : {hset_s * 1e6:9.0f} us  (baseline)")
    print(f"  create, counting arrivals: {save_s * 1e6:9.0f} us")
    print(f"  ratio                    : {save_s / hset_s:9.2f}")
    await client.flushdb()
    await client.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400, help="known runs of 23 events each")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of each")
    parser.add_argument("--redis-url", default=None, help=FLUSHED_URL_HELP)
    args = parser.parse_args()
    with bench_redis(args.redis_url) as redis_url:
        anyio.run(main, redis_url, args.runs, args.rounds)
