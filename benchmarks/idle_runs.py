"""What holding open runs costs when nothing happens: controller and Redis CPU per second.

N runs are started (their `run.started` published on the events stream, 500 a round
trip, and applied by the controller's intake, so the controller holds them as runs it
saw open) and left open: no further event, coaching off, their agent a real reference
agent on loopback that answers at once. A real controller process (`gencoach serve`)
holds them; for each size the benchmark waits for its registrations to end, then
measures over a window: the controller's CPU (user + system, from /proc), Redis's CPU
(`INFO cpu`) and the commands Redis ran (`INFO stats`). The baseline, measured in the
same run, is the same controller holding no run.

    .venv/bin/python -m benchmarks.idle_runs [--sizes 0,1000,10000] [--window-s 60]
        [--redis-url URL]

Without `--redis-url` an embedded Redis is started; a database given is flushed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil
import redis as sync_redis

from benchmarks.common import FLUSHED_URL_HELP, bench_redis
from gencoach.constants import EVENT_FIELD, Keys
from gencoach.protocol import parse_event
from tests.support.controller import ControllerProcess, wait_for
from tests.support.graphs import RUN_STARTED
from tests.support.processes import free_port


def _seed(client: sync_redis.Redis, agent_url: str, first: int, last: int) -> None:
    events = [
        parse_event(
            {
                **RUN_STARTED,
                "type": "run.started",
                "run_id": f"idle-{index:06d}",
                "seq": 0,
                "agent_url": agent_url,
            }
        )
        for index in range(first, last)
    ]
    for start in range(0, len(events), 500):
        pipe = client.pipeline(transaction=False)
        for event in events[start : start + 500]:
            pipe.xadd(Keys().events, {EVENT_FIELD: event.model_dump_json()})
        pipe.execute()


def _registered(client: sync_redis.Redis, count: int) -> bool:
    keys = Keys()
    pipe = client.pipeline(transaction=False)
    for index in range(count):
        pipe.hexists(keys.run(f"idle-{index:06d}", "meta"), "registered")
    return all(pipe.execute())


def _redis_cpu_s(client: sync_redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def _window(controller: psutil.Process, client: sync_redis.Redis, window_s: float) -> str:
    cpu, redis_cpu = controller.cpu_times(), _redis_cpu_s(client)
    commands = int(client.info("stats")["total_commands_processed"])
    time.sleep(window_s)
    after = controller.cpu_times()
    used = after.user + after.system - cpu.user - cpu.system
    redis_used = _redis_cpu_s(client) - redis_cpu
    ran = int(client.info("stats")["total_commands_processed"]) - commands
    return (
        f"{100 * used / window_s:.2f}% | {100 * redis_used / window_s:.2f}% | {ran / window_s:,.0f}"
    )


def measure(url: str, sizes: list[int], window_s: float) -> None:
    """Seed up to each size and print one row per size."""
    client = sync_redis.Redis.from_url(url)
    client.flushdb()
    port = free_port()
    agent = subprocess.Popen(
        [sys.executable, "-m", "gencoach", "agent", "serve", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    agent_url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as folder:
        controller = ControllerProcess(Path(folder), url, settings={"coaching": {"enabled": False}})
        try:
            wait_for(lambda: _up(agent_url), timeout_s=60, what="the reference agent")
            controller.start()
            assert controller.process is not None
            process = psutil.Process(controller.process.pid)
            print(f"window {window_s:g} s per size; controller pid {process.pid}\n")
            print("| open runs | controller CPU | Redis CPU | Redis commands/s |")
            print("|---|---|---|---|")
            seeded = 0
            for size in sizes:
                _seed(client, agent_url, seeded, size)
                seeded = size
                wait_for(lambda s=size: _registered(client, s), timeout_s=600, what="registrations")
                time.sleep(5)  # the registrations' own work settles
                print(f"| {size:,} | {_window(process, client, window_s)} |", flush=True)
        finally:
            controller.stop()
            agent.terminate()
            agent.wait(10)
            client.flushdb()


def _up(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def main() -> None:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="0,1000,10000")
    parser.add_argument("--window-s", type=float, default=60.0)
    parser.add_argument("--redis-url", default=None, help=FLUSHED_URL_HELP)
    args = parser.parse_args()
    sizes = sorted(int(item) for item in args.sizes.split(","))
    with bench_redis(args.redis_url) as url:
        measure(url, sizes, args.window_s)


if __name__ == "__main__":
    main()
