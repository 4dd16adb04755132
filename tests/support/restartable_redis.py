"""A private redis-server on a fixed free port that a test can kill and start again."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from gencoach.runtime.embedded_redis import find_server_binary
from tests.support.processes import STARTUP_S, free_port, log_tail


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RestartableRedis]:
    """A redis-server of the test's own (not the session's), killed after it."""
    server = RestartableRedis(tmp_path / "redis")
    server.start()
    yield server
    server.kill()


class RestartableRedis:
    """One redis-server that a test kills and starts again on the same port.

    Without `aof` it keeps nothing: `restart()` brings it back empty. With `aof` every
    write is appended (and fsynced) to its append-only file, as docs/operations.md
    recommends, and `restart(keep_data=True)` brings it back with its data.
    """

    def __init__(self, folder: Path, *, aof: bool = False) -> None:
        self.folder = folder
        self.aof = aof
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The server's URL (the same across restarts)."""
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def log_path(self) -> Path:
        """The server's output, beside its folder (kept across restarts)."""
        return self.folder.with_name(f"{self.folder.name}.log")

    def start(self, timeout_s: float = STARTUP_S) -> None:
        """Start the server and wait until it answers (loading its AOF, if any)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        persistence = ("yes", "--appendfsync", "always") if self.aof else ("no",)
        args = [
            str(find_server_binary()),
            "--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(self.folder),
            "--save", "", "--daemonize", "no", "--appendonly", *persistence,
        ]  # fmt: skip
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            client = redis.Redis.from_url(self.url, socket_timeout=0.5)
            try:
                if client.ping():
                    return
            except redis.RedisError:
                time.sleep(0.05)
            finally:
                client.close()
        raise AssertionError(
            f"redis-server on port {self.port} did not answer in {timeout_s}s:\n"
            + log_tail(self.log_path)
        )

    def refuse_writes(self, refusing: bool = True) -> None:
        """Put the server at its maxmemory (1 byte, no eviction): every write is refused
        with OOM while reads go on; `refusing=False` lifts the limit."""
        client = redis.Redis.from_url(self.url)
        client.config_set("maxmemory-policy", "noeviction")
        client.config_set("maxmemory", "1" if refusing else "0")
        client.close()

    def kill(self) -> None:
        """SIGKILL the server: every connection drops, every key is gone."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def restart(self, *, keep_data: bool = False) -> None:
        """Kill the server and start it again on the same port, empty or with its data."""
        self.kill()
        if not keep_data:
            for leftover in self.folder.glob("*"):
                if leftover.is_dir():
                    shutil.rmtree(leftover)
                else:
                    leftover.unlink()
        self.start()
