"""Run the worker pool in a subprocess for tests, and find and kill what it started."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import redis
from rq import Queue, Worker

from tests.support.processes import child_pids, pid_alive, wait_gone, wait_started

ROOT = Path(__file__).resolve().parents[2]


def wait_until(check: Callable[[], object], timeout_s: float, what: str) -> None:
    """Poll `check` until it is true, or fail naming `what`."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)


class PoolProcess:
    """`run_workers` in a subprocess; `stop()` takes it and every process under it down."""

    def __init__(self, folder: Path, settings: dict[str, object], redis_url: str) -> None:
        self.config = folder / "settings.json"
        self.config.write_text(json.dumps(settings))
        self.log_path = folder / "pool.log"
        self.redis_url = redis_url
        self.process: subprocess.Popen[bytes] | None = None
        self.seen: set[int] = set()

    def start(
        self,
        *queues: str,
        processes: int = 2,
        burst: bool = False,
        mode: str | None = None,
        concurrency: int | None = None,
    ) -> None:
        """Start the pool on `queues` (mode and concurrency: the settings' unless given)."""
        command = [sys.executable, "-m", "tests.workers.pool_main", str(self.config)]
        command += [self.redis_url, *queues, "--processes", str(processes)]
        if mode is not None:
            command += ["--mode", mode]
        if concurrency is not None:
            command += ["--concurrency", str(concurrency)]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [*command, *(["--burst"] if burst else [])],
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )

    def wait_workers(self, client: redis.Redis, queue: str, count: int = 1) -> None:
        """Wait until `count` workers listen on `queue` (a short lease must not lapse at
        start-up), or fail quoting the pool's output."""
        assert self.process is not None
        listening = Queue(queue, connection=client)

        def ready() -> bool:
            return Worker.count(queue=listening) >= count

        wait_started(ready, self.process, self.log_path, f"the pool's workers on {queue}")

    @property
    def pid(self) -> int:
        """The pool's process id."""
        assert self.process is not None
        return self.process.pid

    def workers(self) -> list[int]:
        """The pool's live worker processes (remembered, to be killed at the end)."""
        pids = child_pids(self.pid)
        self.seen.update(pids)
        for pid in pids:
            self.seen.update(child_pids(pid))
        return pids

    def wait(self, timeout_s: float) -> int:
        """The pool's exit status, or fail after `timeout_s`."""
        assert self.process is not None
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the pool did not exit:\n{self.log()}") from None

    def log(self) -> str:
        """Everything the pool and its workers wrote."""
        return self.log_path.read_text(errors="replace")

    def events(self, name: str) -> list[dict[str, object]]:
        """The JSON log events called `name`."""
        found = []
        decoder = json.JSONDecoder()
        for line in self.log().splitlines():
            # Several worker processes share the log: two of their lines can meet on one.
            at = 0
            while line.startswith("{", at):
                event, at = decoder.raw_decode(line, at)
                if event.get("event") == name:
                    found.append(event)
        return found

    def stop(self) -> None:
        """Kill the pool and every worker and work-horse it ever had."""
        if self.process is not None and self.process.poll() is None:
            self.workers()
            self.process.kill()
            self.process.wait(10)
        for pid in self.seen:
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
                wait_gone(pid, 5)
