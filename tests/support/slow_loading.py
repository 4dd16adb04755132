"""A redis-server whose append-only file takes seconds to load after each restart.

While a restarted Redis loads its data set it accepts connections and answers every
command with `LOADING` (`BusyLoadingError` in redis-py). A real deployment loads for as
long as its data takes; here a block of padding keys, each delayed by Redis's own
`key-load-delay` on load, makes the window a few seconds long on any machine.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from gencoach.runtime.embedded_redis import find_server_binary
from tests.support.processes import STARTUP_S, free_port, log_tail

PADDING = "gc-test-padding:"


class SlowLoadingRedis:
    """One AOF-backed redis-server that a test SIGKILLs and restarts on the same port;
    after `pad()` each restart loads for about `keys * key_delay_us` microseconds."""

    def __init__(self, folder: Path, *, key_delay_us: int = 1000) -> None:
        self.folder = folder
        self.key_delay_us = key_delay_us
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

    def client(self) -> redis.Redis:
        """A client that sees LOADING as it is (redis-py would otherwise retry it)."""
        return redis.Redis.from_url(self.url, retry=Retry(NoBackoff(), 0), socket_timeout=5)

    def start(self) -> None:
        """Start the server; return once it accepts connections (maybe still loading)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        args = [
            str(find_server_binary()),
            "--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(self.folder),
            "--save", "", "--daemonize", "no",
            "--appendonly", "yes", "--appendfsync", "always",
            "--key-load-delay", str(self.key_delay_us),
            "--loading-process-events-interval-bytes", "1024",
        ]  # fmt: skip
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        self._wait(lambda state: state in ("ready", "loading"), "accept connections")

    def loading(self) -> bool:
        """Whether the server answers LOADING now."""
        return self._state() == "loading"

    def wait_loaded(self) -> None:
        """Return once the server has loaded its data set."""
        self._wait(lambda state: state == "ready", "finish loading")

    def pad(self, keys: int) -> None:
        """Write `keys` padding keys and rewrite the AOF, so that they load from its RDB
        base, where each key's load is delayed."""
        client = self.client()
        pipe = client.pipeline(transaction=False)
        for index in range(keys):
            pipe.set(f"{PADDING}{index}", b"x")
        pipe.execute()
        client.bgrewriteaof()
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline:
            info = client.info("persistence")
            if not info["aof_rewrite_in_progress"] and not info["aof_rewrite_scheduled"]:
                client.close()
                return
            time.sleep(0.1)
        raise AssertionError("the AOF rewrite did not end:\n" + log_tail(self.log_path))

    def kill(self) -> None:
        """SIGKILL the server (its AOF, fsynced on every write, keeps every key)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def restart(self) -> None:
        """SIGKILL the server and start it again: it loads its AOF for a while."""
        self.kill()
        self.start()

    def _state(self) -> str:
        client = self.client()
        try:
            client.ping()
        except redis.exceptions.BusyLoadingError:
            return "loading"
        except redis.RedisError:
            return "down"
        finally:
            client.close()
        return "ready"

    def _wait(self, done: object, what: str) -> None:
        assert callable(done)
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                break
            if done(self._state()):
                return
            time.sleep(0.02)
        raise AssertionError(
            f"redis-server on port {self.port} did not {what} in {STARTUP_S} s:\n"
            + log_tail(self.log_path)
        )
