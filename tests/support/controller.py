"""A real controller process (`python -m gencoach serve`) for tests, killed at the end."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import yaml
from rq import Worker

from gencoach.config.settings import WorkerSettings
from tests.support.processes import (
    STARTUP_S,
    descendants,
    free_port,
    kill_tree,
    log_tail,
    wait_started,
)

# A log line worth showing when a test fails: a warning or worse, or a traceback's.
_WORSE = re.compile(r'"level": ?"(?:warning|error|critical)"|Traceback|Error\b')


class PortTakenError(RuntimeError):
    """The controller could not listen: another process took its port first."""


class ControllerProcess:
    """One `gencoach serve` subprocess with its own config file, output dir and log."""

    def __init__(
        self,
        folder: Path,
        redis_url: str,
        *,
        api: dict[str, Any] | None = None,
        env: dict[str, str] | None = None,
        settings: dict[str, Any] | None = None,
        **controller: Any,
    ) -> None:
        self.folder = folder
        self.env = env or {}
        self.output_dir = folder / "output"
        self.port = free_port()
        self.log_path = folder / "controller.log"
        self.config_path = folder / "gencoach.yaml"
        config = {
            "redis": {"url": redis_url},
            "output_dir": str(self.output_dir),
            "api": {"port": self.port, **(api or {})},
            "controller": {"consumer": "test-controller", "grace_s": 5, **controller},
            "log": {"format": "json", "level": "debug"},
            **(settings or {}),
        }
        self.config_path.write_text(yaml.safe_dump(config))
        self._config = config
        self.redis_url = redis_url
        self.worker_processes = WorkerSettings.model_validate(config.get("workers", {})).processes
        self.process: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        """The controller's HTTP API."""
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = STARTUP_S) -> None:
        """Start the process and wait until its health route answers ready (or fail quoting
        the end of its output). A port another process took between its choice and the
        controller's bind (`free_port` can only choose a port free at that moment) is
        chosen again, twice at most."""
        for _ in range(2):
            try:
                return self._start(timeout_s)
            except PortTakenError:
                self.port = free_port()
                self._config["api"]["port"] = self.port
                self.config_path.write_text(yaml.safe_dump(self._config))
        return self._start(timeout_s)

    def _start(self, timeout_s: float) -> None:
        begun = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gencoach", "--config", str(self.config_path), "serve"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env},
        )
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                with self.log_path.open("rb") as output:
                    output.seek(begun)
                    if b"Address already in use" in output.read():
                        raise PortTakenError(self.port)
                raise RuntimeError(f"controller exited at start-up:\n{log_tail(self.log_path)}")
            try:
                if httpx.get(f"{self.url}/health", timeout=0.5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError(
            f"controller not ready in {timeout_s}s; the end of its output:\n"
            + log_tail(self.log_path)
        )

    def signal(self, signum: signal.Signals) -> None:
        """Send a signal to the process."""
        assert self.process is not None
        self.process.send_signal(signum)

    def wait(self, timeout_s: float = 30.0) -> int:
        """Wait for the process to exit; return its exit code."""
        assert self.process is not None
        return self.process.wait(timeout_s)

    def start_workers(self) -> subprocess.Popen[bytes]:
        """Start `gencoach worker` on the same config and wait until each of its processes
        is registered with RQ (or fail quoting its output); it is killed with the controller."""
        output = self.folder / f"workers-{len(self.workers)}.log"
        log = output.open("ab")
        worker = subprocess.Popen(
            [sys.executable, "-m", "gencoach", "--config", str(self.config_path), "worker"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env},
            start_new_session=True,
        )
        log.close()
        self.workers.append(worker)
        count = self.worker_processes
        client = redis.Redis.from_url(self.redis_url)
        try:

            def registered() -> bool:
                ours = set(descendants(worker.pid))
                return sum(w.pid in ours for w in Worker.all(connection=client)) >= count

            wait_started(registered, worker, output, f"`gencoach worker` ({count} processes)")
        finally:
            client.close()
        return worker

    def stop(self) -> None:
        """Kill the controller and the workers that still run."""
        for worker in self.workers:
            if worker.poll() is None:
                kill_tree(worker.pid)
                worker.wait(10)
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def log_text(self) -> str:
        """Everything the process logged."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def trouble(self, lines: int = 40) -> str:
        """The last warnings and errors the controller and its workers logged, each
        process's under its log's name: what a failed test shows of them."""
        shown = []
        for path in [self.log_path, *sorted(self.folder.glob("workers-*.log"))]:
            text = path.read_text(errors="replace") if path.exists() else ""
            worse = [line for line in text.splitlines() if _WORSE.search(line)]
            shown.append(
                f"--- {path.name}: its last warnings and errors\n" + "\n".join(worse[-lines:])
            )
        return "\n".join(shown)

    def log_events(self) -> list[dict[str, Any]]:
        """The JSON log lines the process wrote."""
        events = []
        for line in self.log_text().splitlines():
            if line.startswith("{"):
                events.append(json.loads(line))
        return events


def wait_for(predicate: Any, timeout_s: float = 15.0, what: str = "condition") -> Any:
    """Poll until `predicate()` is truthy; return its value or fail naming `what`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


@pytest.fixture
def controller_factory(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> Iterator[Callable[..., ControllerProcess]]:
    """Make controller processes on the test Redis; every one is killed after the test."""
    made: list[ControllerProcess] = []

    def make(**controller: Any) -> ControllerProcess:
        process = ControllerProcess(tmp_path, redis_url, **controller)
        made.append(process)
        return process

    yield make
    for process in made:
        process.stop()
    # Shown only when the test failed: pytest keeps a passing test's output to itself.
    # (Processes made in one folder share their logs.)
    for folder, process in {process.folder: process for process in made}.items():
        print(f"in {folder}:\n{process.trouble()}")
