"""The Gymnasium integration on BabyAI: gencoach's work per env step against the env's own
step, the Redis connections 64 runs at once hold, against one reporter per run, and how
long runs wait to end on gencoach's settled answer, against the former idle wait.

The reference agent's BabyAI policy (no mistakes) serves on loopback in this process.
Per step: one run at a time, the wall time of the campaign less the time spent waiting
for the agent, per env step, next to the env's own `step` time (both measured in the
same run). Connections: `CLIENT LIST` sampled every 20 ms while 64 runs play at once
over the campaign's pool and its one order reader, next to 64 reporters each blocking
on its own run's branch stream (what a generator without the shared reader does).
Ending: a campaign of `--runs` runs at once beside a real controller (coaching off), each
run ending on the controller's `run.settled` answer, next to the same campaign with no
answer to wait for and the former 10 s idle wait as its bound (what runs did before).
Keys use their own prefix ("bench") and are deleted afterwards.

    .venv/bin/python -m benchmarks.gym [--runs 16] [--level GoToLocal] [--redis-url URL]
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import redis
import uvicorn

from benchmarks.common import SHARED_URL_HELP, bench_redis
from gencoach.agents.reference import ReferenceOptions, reference_app
from gencoach.integrations.gymnasium import CampaignOptions, run_campaign
from gencoach.integrations.gymnasium import campaign as campaign_module
from gencoach.integrations.minigrid import BabyAIAdapter
from gencoach.protocol import AgentInput
from gencoach.reporting.client import AsyncReporter
from gencoach.sim.agent_io import AgentAsker, Answer
from tests.support.controller import ControllerProcess

PREFIX = "bench"


class TimedAsker(AgentAsker):
    """An asker that adds up the time spent waiting for the agent."""

    waited_s = 0.0

    async def ask(self, request_id: str, agent_input: AgentInput) -> list[Answer]:
        started = time.perf_counter()
        try:
            return await super().ask(request_id, agent_input)
        finally:
            TimedAsker.waited_s += time.perf_counter() - started


def serve_agent(port: int) -> uvicorn.Server:
    """The reference agent on BabyAI, in a thread."""
    app = reference_app(ReferenceOptions(world="babyai"))
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False)
    server = uvicorn.Server(config)
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return server


def clean(url: str) -> None:
    client = redis.Redis.from_url(url)
    keys = list(client.scan_iter(f"{PREFIX}:*"))
    if keys:
        client.delete(*keys)
    client.close()


def per_step(url: str, agent: str, level: str, runs: int) -> dict[str, float]:
    """Seconds per env step: gencoach's own work, and the env's step."""
    campaign_module.AgentAsker = TimedAsker  # type: ignore[misc]
    options = CampaignOptions(
        adapter=BabyAIAdapter(level),
        agent_url=agent,
        redis_url=url,
        key_prefix=PREFIX,
        runs=runs,
        concurrency=1,
        settle_timeout_s=0.0,
    )
    TimedAsker.waited_s = 0.0
    started = time.perf_counter()
    report = anyio.run(run_campaign, options)
    wall = time.perf_counter() - started
    steps = report.total.env_steps
    env_s = report.total.env_step_s / steps
    return {
        "steps": steps,
        "gencoach_s": (wall - TimedAsker.waited_s) / steps - env_s,
        "env_s": env_s,
        "agent_s": TimedAsker.waited_s / steps,
    }


def connections(url: str, agent: str, level: str, runs: int) -> tuple[int, int]:
    """Peak connections of `runs` runs at once, and of as many reporters each reading orders."""
    probe = redis.Redis.from_url(url)
    peak = [0, 0]
    stop = threading.Event()

    def sample(slot: int, name: str | None) -> None:
        while not stop.is_set():
            clients = probe.client_list()
            count = sum(1 for c in clients if name is None or c.get("name") == name) - (
                1 if name is None else 0
            )
            peak[slot] = max(peak[slot], count)
            time.sleep(0.02)

    options = CampaignOptions(
        adapter=BabyAIAdapter(level),
        agent_url=agent,
        redis_url=url,
        key_prefix=PREFIX,
        runs=runs,
        concurrency=runs,
        settle_timeout_s=1.0,
    )
    thread = threading.Thread(target=sample, args=(0, campaign_module.CLIENT_NAME))
    thread.start()
    anyio.run(run_campaign, options)
    stop.set()
    thread.join()
    baseline = probe.client_list().__len__()

    async def readers() -> None:
        reporters = [
            AsyncReporter(f"bench-{i}", redis_url=url, key_prefix=PREFIX) for i in range(runs)
        ]
        async with anyio.create_task_group() as tg:
            for reporter in reporters:
                tg.start_soon(reporter.branch_orders, 1.0)
        for reporter in reporters:
            await reporter.aclose()

    stop.clear()
    peak_before = baseline

    def sample_all() -> None:
        while not stop.is_set():
            peak[1] = max(peak[1], len(probe.client_list()) - peak_before)
            time.sleep(0.02)

    thread = threading.Thread(target=sample_all)
    thread.start()
    anyio.run(readers)
    stop.set()
    thread.join()
    probe.close()
    return peak[0], peak[1]


def ending(url: str, agent: str, level: str, runs: int) -> dict[str, float]:
    """Mean seconds from a run's last events to its end, `runs` runs at once: on the settled
    answer, then on the idle wait; and the campaigns' wall times."""
    options = CampaignOptions(
        adapter=BabyAIAdapter(level),
        agent_url=agent,
        redis_url=url,
        key_prefix=PREFIX,
        runs=runs,
        concurrency=runs,
        settle_timeout_s=60.0,
    )
    with tempfile.TemporaryDirectory() as folder:
        settings = {"redis": {"url": url, "key_prefix": PREFIX}}
        controller = ControllerProcess(Path(folder), url, settings=settings)
        controller.start()
        try:
            started = time.perf_counter()
            report = anyio.run(run_campaign, options)
            settled_s = time.perf_counter() - started
        finally:
            controller.stop()
    idle = CampaignOptions(**{**vars(options), "settle_timeout_s": 10.0})
    started = time.perf_counter()
    waited = anyio.run(run_campaign, idle)
    return {
        "settled_s": settled_s,
        "idle_s": time.perf_counter() - started,
        "settled_end_s": report.total.ending_s / runs,
        "idle_end_s": waited.total.ending_s / runs,
        "bounded": report.total.settle_timeouts,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument("--level", default="GoToLocal")
    parser.add_argument("--parallel", type=int, default=64)
    parser.add_argument("--port", type=int, default=8792)
    parser.add_argument("--redis-url", help=SHARED_URL_HELP)
    args = parser.parse_args()
    server = serve_agent(args.port)
    agent = f"http://127.0.0.1:{args.port}"
    with bench_redis(args.redis_url) as url:
        try:
            timing: dict[str, Any] = per_step(url, agent, args.level, args.runs)
            pooled, per_run = connections(url, agent, args.level, args.parallel)
            clean(url)
            ends = ending(url, agent, args.level, args.runs)
        finally:
            clean(url)
    server.should_exit = True
    print(f"{args.level}: {timing['steps']} env steps over {args.runs} runs, one at a time")
    print(f"  env step          {timing['env_s'] * 1e6:9.0f} µs")
    print(f"  gencoach per step {timing['gencoach_s'] * 1e6:9.0f} µs")
    print(f"  agent per step    {timing['agent_s'] * 1e6:9.0f} µs (not gencoach's)")
    print(f"{args.parallel} runs at once: {pooled} connections (campaign pool + order reader)")
    print(f"{args.parallel} reporters reading their own orders: {per_run} connections")
    print(f"{args.runs} runs at once, from a run's last events to its end (mean), and wall time:")
    print(f"  on the settled answer    {ends['settled_end_s']:7.2f} s   {ends['settled_s']:6.1f} s")
    print(f"  on the former idle wait  {ends['idle_end_s']:7.2f} s   {ends['idle_s']:6.1f} s")
    print(f"  ratio (idle / settled)   {ends['idle_end_s'] / ends['settled_end_s']:7.1f}x")
    print(f"  runs that ended on the bound instead of the answer: {ends['bounded']:.0f}")


if __name__ == "__main__":
    main()
