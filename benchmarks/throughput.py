"""Corrections per second against W concurrent LLM slots, next to the ideal W/D.

A real controller (`gencoach serve`) and ONE worker process (`gencoach worker -p 1`)
coach N = `--per-slot`·W independent failures, each in its own run, each needing a
diagnosis from a scripted OpenAI-compatible LLM that answers after exactly D seconds
(`--latency-s`) and a repair from a scripted agent that answers at once. The backend's
`max_concurrency` is W; the worker runs up to 2·W jobs at once; the per-stage limits
are out of the way. The runs are reported up to their failing execution before the
clock starts; then all N failures are sent at once, and the clock runs until the last
branch order appears. `--via http` (the default) posts them as an integrator does, to
the controller's `POST /v1/events`, `--runs-per-request` runs' events per request, from
`--post-concurrency` threads sharing one keep-alive HTTP client; `--via stream` publishes
them with `gencoach.reporting.client.Reporter` straight to the Redis events stream, one run after
the other. With `--fresh`, nothing is reported before the clock starts: each run's whole
life up to its failure (its start, stage and three decisions) is sent at once, as a
campaign of short episodes does. Printed per W: throughput, its ratio to the ideal W/D
and to MAGMA-GEN's one-job-at-a-time policy (1/D), p50/p99 correction latency, CPU ms per correction
(controller, workers, Redis, from /proc), Redis commands per correction (the delta of
`INFO commandstats`, which counts the commands Lua scripts run too, over the measured
part, less the benchmark's own XREADs of the branch orders and its INFO), the peak RSS of
the worker processes, and where the time beyond N·D/W went: the posting (the clock's
start to the last failure accepted), the lead (to the first LLM call) and the tail (the
last LLM answer to the last branch order), then the CPU this harness spent per
correction (its scripted LLM and agent, its posting threads) and the cores every process
kept busy on average (service and harness: near the machine's count, it is CPU-bound).
Under the table, per W, the 12 commands Redis ran most, per correction.

    .venv/bin/python -m benchmarks.throughput [--slots 1,2,4,8,16,32] [--per-slot 10]
        [--latency-s 1.0] [--via http|stream] [--runs-per-request 1]
        [--post-concurrency 16] [--fresh] [--redis-url URL] [--log-level warning]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import redis
from rq import Worker

from benchmarks.common import FLUSHED_URL_HELP, bench_redis, p50, percentile
from gencoach.constants import ORDER_FIELD, Keys
from gencoach.reporting.client import Reporter
from tests.support import llm_server
from tests.support.agent_server import ScriptedAgent, ThreadedServer
from tests.support.coaching import PRESS_SW4
from tests.support.controller import ControllerProcess
from tests.support.graphs import known_run_events
from tests.support.llm_server import ScriptedLLMServer, delayed, json_reply
from tests.support.processes import child_pids

DIAGNOSIS = {"decision_index": 2, "reason": "sw9 is wrong", "expected_decision": PRESS_SW4}
TICK_S = 1 / os.sysconf("SC_CLK_TCK")
SETUP_CHUNK = 16  # runs started at a time, before the measured part
TOP_COMMANDS = 12  # the commands listed under the table, per W
# The scripted LLM's listen backlog: socketserver's default of 5 drops connections when
# 32 calls arrive at once, and a dropped SYN costs the caller a 1 s retransmission.
llm_server._QuietServer.request_queue_size = 256


@dataclass(frozen=True)
class Row:
    """One W's measurements."""

    slots: int
    corrections: int
    elapsed_s: float
    latencies: list[float]
    cpu_s: dict[str, float]  # controller, workers, redis, and this harness
    worker_peak_rss_mb: float
    lead_s: float  # from publishing the failures to the first LLM call
    tail_s: float  # from the last LLM answer to the last branch order
    post_s: float  # from the clock's start to the last failure accepted
    commands: dict[str, int]  # Redis commands run over the measured part, by name


def _settings(llm: ScriptedLLMServer, slots: int, log_level: str) -> dict[str, object]:
    backend = {
        "type": "openai",
        "endpoint": llm.endpoint,
        "default_model": "scripted",
        "timeout_s": 60,
        "max_retries": 0,
        "max_concurrency": slots,
    }
    limits = {"max_pending_per_stage": 10_000, "max_unproven_per_stage": 10_000}
    routes = {"format": False, "suboptimal": False}
    return {
        "coaching": {"enabled": True, "lease_s": 30, "routes": routes, **limits},
        "backends": {"llm": backend},
        "workers": {"processes": 1, "concurrency": 2 * slots, "job_timeout_s": 120},
        "log": {"format": "json", "level": log_level},
    }


def _cpu_s(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) * TICK_S  # utime, stime


def _own_cpu_s() -> float:
    """This process's CPU: the scripted LLM and agent, the posting threads, the reads."""
    times = os.times()
    return times.user + times.system


def _peak_rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except FileNotFoundError:
        pass
    return 0.0


def _tree(pid: int) -> list[int]:
    found = [pid]
    for child in child_pids(pid):
        found += _tree(child)
    return found


def _life(agent_url: str) -> list[tuple[str, dict[str, Any]]]:
    """A run's events up to and including its failing execution (event `seq` = index)."""
    events = known_run_events()[:-1]
    failing = next(
        i
        for i, (kind, fields) in enumerate(events)
        if fields.get("candidate_id") == "c4" and kind == "candidate.executed"
    )
    return [
        (kind, {**fields, "agent_url": agent_url} if kind == "run.started" else fields)
        for kind, fields in events[: failing + 1]
    ]


def _publish(redis_url: str, runs: list[str], life: list[tuple[str, dict[str, Any]]]) -> None:
    """Report each run up to (not including) its failing execution."""
    for run_id in runs:
        with Reporter(run_id, redis_url=redis_url) as reporter:
            for kind, fields in life[:-1]:
                reporter.emit(kind, **fields)


class _HttpPoster:
    """Posts the failures to `POST /v1/events` from a thread pool, in the background.

    One httpx client (thread-safe, keep-alive) with as many connections as threads; each
    request carries the events of `runs_per_request` runs. `sent` gets each run's time
    just before its request goes out.
    """

    def __init__(self, api_url: str, concurrency: int, runs_per_request: int) -> None:
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        self._http = httpx.Client(base_url=api_url, limits=limits, timeout=60)
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix="post")
        self._runs_per_request = runs_per_request
        self._futures: list[Future[float]] = []
        self._errors: list[str] = []
        self._lock = threading.Lock()

    def start(self, events: dict[str, list[dict[str, Any]]], sent: dict[str, float]) -> None:
        """Queue every request; return at once."""
        runs = list(events)
        for first in range(0, len(runs), self._runs_per_request):
            batch = runs[first : first + self._runs_per_request]
            self._futures.append(self._pool.submit(self._post, batch, events, sent))

    def _post(
        self, batch: list[str], events: dict[str, list[dict[str, Any]]], sent: dict[str, float]
    ) -> float:
        now = time.monotonic()
        for run_id in batch:
            sent[run_id] = now
        body = [event for run_id in batch for event in events[run_id]]
        try:
            response = self._http.post("/v1/events", json=body)
        except httpx.HTTPError as error:
            problem = f"POST /v1/events for {batch[0]}: {error!r}"
        else:
            if response.status_code == httpx.codes.ACCEPTED:
                return time.monotonic()
            problem = f"POST /v1/events for {batch[0]}: {response.status_code} {response.text}"
        with self._lock:
            self._errors.append(problem)
        return time.monotonic()

    def check(self) -> None:
        """Stop the measurement when a request failed."""
        with self._lock:
            if self._errors:
                raise SystemExit(
                    f"{len(self._errors)} requests failed, the first: {self._errors[0]}"
                )

    def finish(self) -> float:
        """Wait for every request; when the last one was accepted."""
        accepted = max(future.result() for future in self._futures)
        self.check()
        return accepted

    def close(self) -> None:
        """Stop the threads and close the connections."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._http.close()


def _command_calls(client: redis.Redis) -> dict[str, int]:
    """The calls of every command Redis ran since its start (or CONFIG RESETSTAT)."""
    stats = client.info("commandstats")
    return {
        name.removeprefix("cmdstat_"): int(value["calls"])
        for name, value in stats.items()
        if name.startswith("cmdstat_")
    }


def _wait_intake(client: redis.Redis, timeout_s: float = 120) -> None:
    """Wait until the controller has read and acknowledged every event published so far."""
    stream = Keys().events
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        last = client.xinfo_stream(stream)["last-generated-id"]
        groups = client.xinfo_groups(stream)
        if groups and all(g["last-delivered-id"] == last and g["pending"] == 0 for g in groups):
            return
        time.sleep(0.1)
    raise SystemExit(f"the controller did not take in the events within {timeout_s} s")


def _wait_orders(
    client: redis.Redis,
    runs: list[str],
    sent: dict[str, float],
    timeout_s: float,
    check: Callable[[], None] = lambda: None,
) -> tuple[dict[str, float], int]:
    """Each run's latency to its branch order, and the XREADs it took to see them all."""
    streams = {Keys().branches(run_id): run_id for run_id in runs}
    done: dict[str, float] = {}
    reads = 0
    deadline = time.monotonic() + timeout_s
    while len(done) < len(runs):
        check()
        if time.monotonic() > deadline:
            raise SystemExit(f"only {len(done)} of {len(runs)} corrections in {timeout_s} s")
        waiting = {stream: "0" for stream, run_id in streams.items() if run_id not in done}
        reads += 1
        for stream, entries in client.xread(waiting, block=50) or []:
            name = stream.decode() if isinstance(stream, bytes) else stream
            if any(ORDER_FIELD.encode() in fields for _, fields in entries):
                done[streams[name]] = time.monotonic()
    return {run_id: done[run_id] - sent[run_id] for run_id in runs}, reads


def measure(
    redis_url: str,
    slots: int,
    per_slot: int,
    latency_s: float,
    folder: Path,
    log_level: str = "warning",
    via: str = "http",
    runs_per_request: int = 1,
    post_concurrency: int = 16,
    fresh: bool = False,
) -> Row:
    """Coach `per_slot`·`slots` failures with `slots` LLM slots; their measurements.

    `via` is how the failures are sent: "http" to the controller's `POST /v1/events`,
    "stream" with a Reporter straight to the Redis events stream. With `fresh`, each
    run's whole life up to its failure is sent in the measured part, not only the failure."""
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    redis_pid = int(client.info("server")["process_id"])
    llm = ScriptedLLMServer(default=delayed(latency_s, json_reply(DIAGNOSIS))).start()
    agent = ThreadedServer(ScriptedAgent().app())
    agent.start()
    controller = ControllerProcess(folder, redis_url, settings=_settings(llm, slots, log_level))
    poster: _HttpPoster | None = None
    try:
        controller.start()
        workers = controller.start_workers()
        deadline = time.monotonic() + 60
        while Worker.count(connection=client) < 1:
            if time.monotonic() > deadline:
                raise SystemExit("the worker did not register within 60 s")
            time.sleep(0.05)
        runs = [f"w{slots}-{i}" for i in range(per_slot * slots)]
        life = _life(agent.url)
        sent_first = 0 if fresh else len(life) - 1
        if not fresh:
            # Runs start in chunks (their start is not what is measured).
            for first in range(0, len(runs), SETUP_CHUNK):
                _publish(redis_url, runs[first : first + SETUP_CHUNK], life)
                _wait_intake(client)
        assert controller.process is not None
        pids = {"controller": [controller.process.pid], "redis": [redis_pid]}
        pids["workers"] = _tree(workers.pid)
        failures = {
            run_id: [
                {"type": kind, "run_id": run_id, "seq": seq, **fields}
                for seq, (kind, fields) in enumerate(life)
                if seq >= sent_first
            ]
            for run_id in runs
        }
        if via == "http":
            poster = _HttpPoster(controller.url, post_concurrency, runs_per_request)
        sent: dict[str, float] = {}
        commands_before = _command_calls(client)
        before = {name: sum(_cpu_s(pid) for pid in group) for name, group in pids.items()}
        before["harness"] = _own_cpu_s()
        started = time.monotonic()
        if poster is not None:
            poster.start(failures, sent)
        else:
            for run_id in runs:
                with Reporter(run_id, redis_url=redis_url, start_seq=sent_first) as reporter:
                    sent[run_id] = time.monotonic()
                    for kind, fields in life[sent_first:]:
                        reporter.emit(kind, **fields)
            posted = time.monotonic()
        timeout_s = 60 + 4 * per_slot * latency_s
        check = poster.check if poster is not None else lambda: None
        latencies, own_reads = _wait_orders(client, runs, sent, timeout_s, check)
        elapsed = time.monotonic() - started
        if poster is not None:
            posted = poster.finish()
        commands_after = _command_calls(client)
        calls = sorted(request.received_at for request in llm.requests)
        lead_s = calls[0] - started
        tail_s = started + elapsed - (calls[-1] + latency_s)
        pids["workers"] = _tree(workers.pid)
        after = {name: sum(_cpu_s(pid) for pid in group) for name, group in pids.items()}
        after["harness"] = _own_cpu_s()
        peak_rss = sum(_peak_rss_mb(pid) for pid in pids["workers"])
    except SystemExit:
        print(controller.log_text()[-6000:])
        for log in sorted(folder.glob("workers-*.log")):
            print(log.read_text()[-6000:])
        raise
    finally:
        if poster is not None:
            poster.close()
        controller.stop()
        agent.stop()
        llm.stop()
    cpu = {name: after[name] - before[name] for name in before}
    # The benchmark's own commands are not the service's: its XREADs of the branch orders
    # and the first INFO (counted once it ran, so in the second snapshot).
    own = {"xread": own_reads, "info": 1}
    commands = {
        name: count - commands_before.get(name, 0) - own.get(name, 0)
        for name, count in commands_after.items()
    }
    commands = {name: count for name, count in commands.items() if count > 0}
    latency_list = list(latencies.values())
    return Row(
        slots,
        len(runs),
        elapsed,
        latency_list,
        cpu,
        peak_rss,
        lead_s,
        tail_s,
        posted - started,
        commands,
    )


def _top_commands(row: Row) -> str:
    per_correction = sorted(
        ((calls / row.corrections, name) for name, calls in row.commands.items()), reverse=True
    )
    listed = ", ".join(f"{name} {value:.1f}" for value, name in per_correction[:TOP_COMMANDS])
    total = sum(row.commands.values()) / row.corrections
    return f"W = {row.slots}: {total:.1f} Redis commands per correction; top: {listed}"


def main() -> None:
    """Measure every W given and print one line each, then each W's top Redis commands."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", default="1,2,4,8,16,32", help="W values, comma-separated")
    parser.add_argument("--per-slot", type=int, default=10, help="corrections per slot (N/W)")
    parser.add_argument("--latency-s", type=float, default=1.0, help="the LLM's latency D")
    parser.add_argument("--redis-url", default=None, help=FLUSHED_URL_HELP)
    parser.add_argument("--log-level", default="warning", help="of the controller and worker")
    parser.add_argument(
        "--via",
        choices=("http", "stream"),
        default="http",
        help="send the failures to POST /v1/events (default) or to the Redis events stream",
    )
    parser.add_argument(
        "--runs-per-request", type=int, default=1, help="runs' events per POST (--via http)"
    )
    parser.add_argument(
        "--post-concurrency", type=int, default=16, help="requests at once (--via http)"
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="send each run's whole life in the measured part, not only its failure",
    )
    options = parser.parse_args()
    d = options.latency_s
    if options.via == "http":
        how = (
            f"POST /v1/events, {options.runs_per_request} run(s) per request,"
            f" {options.post_concurrency} at once"
        )
    else:
        how = "Reporter to the Redis events stream, one run after the other"
    print(f"D = {d} s, N = {options.per_slot}·W, one worker process, worker concurrency 2·W")
    print(f"failures sent via {options.via}: {how}")
    if options.fresh:
        print("fresh runs: each run's whole life up to its failure is sent in the measured part")
    print(
        f"{'W':>3} {'N':>4} {'corr/s':>7} {'/ideal':>7} {'/GEN':>6} {'p50 s':>6} {'p99 s':>6}"
        f" {'CPU ms/corr (ctl+wrk+redis)':>28} {'redis cmds/corr':>15}"
        f" {'worker peak RSS':>16} {'post s':>6} {'lead s':>6} {'tail s':>6}"
        f" {'harness ms':>10} {'cores busy':>10}"
    )
    rows: list[Row] = []
    with bench_redis(options.redis_url) as url:
        for slots in (int(value) for value in options.slots.split(",")):
            with tempfile.TemporaryDirectory() as folder:
                row = measure(
                    url,
                    slots,
                    options.per_slot,
                    d,
                    Path(folder),
                    options.log_level,
                    via=options.via,
                    runs_per_request=options.runs_per_request,
                    post_concurrency=options.post_concurrency,
                    fresh=options.fresh,
                )
            rows.append(row)
            commands = sum(row.commands.values()) / row.corrections
            rate = row.corrections / row.elapsed_s
            cpu = {name: 1000 * value / row.corrections for name, value in row.cpu_s.items()}
            harness = cpu.pop("harness")
            parts = f"{cpu['controller']:.1f}+{cpu['workers']:.1f}+{cpu['redis']:.1f}"
            busy = sum(row.cpu_s.values()) / row.elapsed_s
            print(
                f"{row.slots:>3} {row.corrections:>4} {rate:>7.2f} {rate * d / row.slots:>7.3f}"
                f" {rate * d:>6.2f} {p50(row.latencies):>6.2f}"
                f" {percentile(row.latencies, 0.99):>6.2f}"
                f" {sum(cpu.values()):>8.1f} = {parts:<18} {commands:>15.1f}"
                f" {row.worker_peak_rss_mb:>13.0f} MB"
                f" {row.post_s:>6.2f} {row.lead_s:>6.2f} {row.tail_s:>6.2f}"
                f" {harness:>10.1f} {busy:>10.2f}",
                flush=True,
            )
    print()
    for row in rows:
        print(_top_commands(row))


if __name__ == "__main__":
    main()
