"""A private redis-server on a fixed free port that a test can kill and start again."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import redis

from gencoach.embedded_redis import find_server_binary
from tests.support.processes import free_port


class RestartableRedis:
    """One redis-server without persistence: `restart()` brings it back empty, same port."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The server's URL (the same across restarts)."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 10.0) -> None:
        """Start the server and wait until it answers."""
        self.folder.mkdir(parents=True, exist_ok=True)
        args = [
            str(find_server_binary()),
            "--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(self.folder),
            "--save", "", "--appendonly", "no", "--daemonize", "no",
        ]  # fmt: skip
        self.process = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            client = redis.Redis.from_url(self.url, socket_timeout=0.5)
            try:
                if client.ping():
                    return
            except redis.RedisError:
                time.sleep(0.05)
            finally:
                client.close()
        raise AssertionError(f"redis-server on port {self.port} did not answer in {timeout_s}s")

    def kill(self) -> None:
        """SIGKILL the server: every connection drops, every key is gone."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def restart(self) -> None:
        """Kill the server and start an empty one on the same port."""
        self.kill()
        self.start()
