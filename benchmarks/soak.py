"""A soak: steady coaching load with a fault every few minutes, memory recorded over time.

A real controller (`gencoach serve`) and worker pool (`gencoach worker`) coach runs
reported by generator threads (the known run of the tests: a failure the scripted LLM
diagnoses and the scripted agent corrects, then the branch executed and proven) on a
Redis of the soak's own with its append-only file. Every `--fault-every-s` one fault
comes, in turn: every client connection dropped with the script cache, Redis SIGKILLed
and restarted from its AOF, Redis at its maxmemory for 15 s, the worker pool
SIGKILLed and started again. The controller itself is never killed, so its memory is
measured over the whole soak.

Every `--sample-s` it records the controller's RSS, the worker pool's (the pool and its
workers together), Redis's `used_memory`, its keys (gencoach's and RQ's apart: RQ keeps
a finished job's hash for an hour, `rq_adapter.RESULT_TTL_S`, so its keys rise for the
first hour before they level) and the runs finished so far, then prints the samples and
compares the last third of the soak with the middle third. Saved runs' keys expire
after `--saved-ttl-s` (300 s, not the day of the default) and cached nodes after
`--node-cache-ttl-s` (300 s, the default), so that the levels are reached within the
soak; `--short` takes 60 s for both.

    .venv/bin/python -m benchmarks.soak [--duration-s 1800] [--fault-every-s 180]
        [--sample-s 30] [--generators 3] [--saved-ttl-s 300]
    .venv/bin/python -m benchmarks.soak --short     # 5 minutes, a fault a minute
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil
import redis

from tests.support.agent_server import ScriptedAgent, ThreadedServer
from tests.support.coaching import PRESS_SW4, coaching_settings
from tests.support.controller import ControllerProcess
from tests.support.llm_server import (
    ScriptedLLMServer,
    delayed,
    json_reply,
    scripted_llm_servers,
)
from tests.support.load import LoadReport, generate
from tests.support.processes import kill_tree
from tests.support.restartable_redis import RestartableRedis

DIAGNOSIS = {
    "decision_index": 2,
    "reason": "sw9 is not in the task",
    "expected_decision": PRESS_SW4,
}
FULL_S = 15.0
BRANCH_WINDOW_S = 4.0
MB = 1024 * 1024


@dataclass
class Sample:
    """One reading of the system's memory."""

    at_s: float
    controller_mb: float
    workers_mb: float
    redis_mb: float
    keys: int
    rq_keys: int
    runs_done: int
    fault: str


def _rss_mb(pid: int, with_children: bool = False) -> float:
    try:
        process = psutil.Process(pid)
        members = [process, *(process.children(recursive=True) if with_children else [])]
        total = 0
        for member in members:
            try:
                total += member.memory_info().rss
            except psutil.NoSuchProcess:
                continue
        return total / MB
    except psutil.NoSuchProcess:
        return 0.0


class Soak:
    """The system under load, its faults and its samples."""

    def __init__(
        self, folder: Path, agent_url: str, llm: ScriptedLLMServer, args: argparse.Namespace
    ) -> None:
        self.args = args
        self.agent_url = agent_url
        self.redis = RestartableRedis(folder / "redis", aof=True)
        self.redis.start()
        settings = coaching_settings(llm, format=False, suboptimal=False)
        settings["coaching"]["lease_s"] = 10
        settings["log"] = {"format": "json", "level": "warning"}
        self.controller = ControllerProcess(
            folder,
            self.redis.url,
            settings=settings,
            saved_ttl_s=args.saved_ttl_s,
            node_cache_ttl_s=args.node_cache_ttl_s,
        )
        self.report = LoadReport()
        self.stopping = threading.Event()
        self.faults: list[str] = []
        self.samples: list[Sample] = []
        self.started = time.monotonic()

    def start(self) -> None:
        """Start the controller, the workers and the generators."""
        self.controller.start()
        self.controller.start_workers()
        for index in range(self.args.generators):
            threading.Thread(target=self._generator, args=(index,), daemon=True).start()

    def _generator(self, index: int) -> None:
        for number in itertools.count():
            if self.stopping.is_set():
                return
            run_id = f"soak-{index}-{number:05d}"
            generate(run_id, self.redis.url, self.agent_url, self.report, BRANCH_WINDOW_S)

    # The faults, in turn.
    def drop_connections(self) -> None:
        client = redis.Redis.from_url(self.redis.url)
        client.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        client.script_flush()
        client.close()

    def restart_redis(self) -> None:
        self.redis.restart(keep_data=True)

    def fill_redis(self) -> None:
        client = redis.Redis.from_url(self.redis.url)
        client.config_set("maxmemory-policy", "noeviction")
        client.config_set("maxmemory", "1")  # below what it holds: every write is refused
        time.sleep(FULL_S)
        client.config_set("maxmemory", "0")
        client.close()

    def kill_workers(self) -> None:
        for worker in self.controller.workers:
            if worker.poll() is None:
                kill_tree(worker.pid)
                worker.wait(10)
        self.controller.workers.clear()
        self.controller.start_workers()

    def sample(self, fault: str) -> Sample:
        """Read every process's memory and Redis's now."""
        assert self.controller.process is not None
        if self.controller.process.poll() is not None:
            raise SystemExit(f"the controller exited:\n{self.controller.log_text()[-3000:]}")
        client = redis.Redis.from_url(self.redis.url, socket_timeout=10)
        try:
            memory = int(client.info("memory")["used_memory"])
            keys = int(client.dbsize())
            rq_keys = sum(1 for _ in client.scan_iter(match="rq:*", count=1000))
        except redis.RedisError:
            memory, keys, rq_keys = -1, -1, -1
        finally:
            client.close()
        workers = sum(_rss_mb(w.pid, with_children=True) for w in self.controller.workers)
        with self.report.lock:
            done = len(self.report.finished)
        return Sample(
            at_s=time.monotonic() - self.started,
            controller_mb=_rss_mb(self.controller.process.pid),
            workers_mb=workers,
            redis_mb=memory / MB,
            keys=keys - rq_keys,
            rq_keys=rq_keys,
            runs_done=done,
            fault=fault,
        )

    def run(self) -> None:
        """Load, faults and samples for the soak's duration."""
        faults: list[tuple[str, Callable[[], None]]] = [
            ("connections dropped", self.drop_connections),
            ("redis restarted (AOF)", self.restart_redis),
            (f"redis at maxmemory {FULL_S:.0f} s", self.fill_redis),
            ("workers killed", self.kill_workers),
        ]
        turn = itertools.cycle(faults)
        next_fault = self.args.fault_every_s
        next_sample = 0.0
        fault_name = ""
        end = self.args.duration_s
        while (now := time.monotonic() - self.started) < end:
            if now >= next_sample:
                self.samples.append(self.sample(fault_name))
                _print_sample(self.samples[-1])
                fault_name = ""
                next_sample += self.args.sample_s
            if now >= next_fault:
                fault_name, action = next(turn)
                action()
                self.faults.append(f"{now:.0f}s {fault_name}")
                next_fault += self.args.fault_every_s
            time.sleep(0.5)
        self.samples.append(self.sample(fault_name))
        _print_sample(self.samples[-1])

    def stop(self) -> None:
        """Stop the generators and every process."""
        self.stopping.set()
        self.controller.stop()
        self.redis.kill()


def _print_sample(sample: Sample) -> None:
    print(
        f"{sample.at_s:7.0f} {sample.controller_mb:12.1f} {sample.workers_mb:11.1f} "
        f"{sample.redis_mb:9.1f} {sample.keys:7d} {sample.rq_keys:7d} {sample.runs_done:6d}  "
        f"{sample.fault}",
        flush=True,
    )


def _level(samples: list[Sample]) -> None:
    """Compare the last third of the samples with the middle third."""
    third = max(1, len(samples) // 3)
    middle, last = samples[third : 2 * third], samples[-third:]
    if not middle:
        return
    print("\nmedian of the middle third -> of the last third:")
    for name in ("controller_mb", "workers_mb", "redis_mb", "keys", "rq_keys"):
        before = statistics.median(getattr(s, name) for s in middle)
        after = statistics.median(getattr(s, name) for s in last)
        change = (after - before) / before * 100 if before else 0.0
        print(f"  {name:14s} {before:10.1f} -> {after:10.1f}  ({change:+.0f}%)")


def main(argv: list[str]) -> int:
    """Run the soak and print its samples."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration-s", type=float, default=1800.0)
    parser.add_argument("--fault-every-s", type=float, default=180.0)
    parser.add_argument("--sample-s", type=float, default=30.0)
    parser.add_argument("--generators", type=int, default=3)
    parser.add_argument("--saved-ttl-s", type=int, default=300)
    parser.add_argument("--node-cache-ttl-s", type=float, default=300.0)
    parser.add_argument("--short", action="store_true", help="5 minutes, a fault a minute")
    args = parser.parse_args(argv)
    if args.short:
        args.duration_s, args.fault_every_s, args.sample_s = 300.0, 60.0, 15.0
        args.saved_ttl_s = min(args.saved_ttl_s, 60)
        args.node_cache_ttl_s = min(args.node_cache_ttl_s, 60.0)
    print(
        f"soak: {args.duration_s:.0f} s, a fault every {args.fault_every_s:.0f} s, "
        f"{args.generators} generators, saved runs expire after {args.saved_ttl_s} s, "
        f"cached nodes after {args.node_cache_ttl_s:.0f} s",
        flush=True,
    )
    agent = ScriptedAgent()
    agent_server = ThreadedServer(agent.app())
    agent_server.start()
    agent.url = agent_server.url
    with tempfile.TemporaryDirectory() as folder, scripted_llm_servers() as start_llm:
        llm = start_llm(delayed(0.5, json_reply(DIAGNOSIS)))
        soak = Soak(Path(folder), agent.url, llm, args)
        try:
            soak.start()
            print(
                "    at_s controller_mb  workers_mb  redis_mb    keys rq_keys   runs  fault",
                flush=True,
            )
            soak.run()
        finally:
            soak.stop()
            agent_server.stop()
    with soak.report.lock:
        errors = list(soak.report.errors)
        runs = len(soak.report.finished)
    print(f"\nruns finished: {runs}, generator errors: {len(errors)}")
    for error in errors[:10]:
        print("  ", error)
    print("faults:", "; ".join(soak.faults))
    _level(soak.samples)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
