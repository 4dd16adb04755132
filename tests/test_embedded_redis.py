"""The embedded Redis server: started, shared, serving RQ and Lua, and never left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import redis
from rq import Queue, SimpleWorker

from gencoach.errors import EmbeddedRedisError
from gencoach.runtime.embedded_redis import URL_FILE, EmbeddedRedis
from tests.support.jobs import add
from tests.support.processes import pid_alive, wait_gone

pytestmark = pytest.mark.slow


def test_serves_lua_scripts(tmp_path: Path) -> None:
    """A started server runs a registered Lua script, also after its script cache is flushed."""
    with EmbeddedRedis(tmp_path, persist=False) as server:
        assert server.url is not None
        client = redis.Redis.from_url(server.url)
        incr_by = client.register_script("return redis.call('INCRBY', KEYS[1], ARGV[1])")
        assert incr_by(keys=["counter"], args=[2]) == 2
        client.script_flush()
        assert incr_by(keys=["counter"], args=[3]) == 5
        client.close()


def test_serves_rq_jobs(tmp_path: Path) -> None:
    """An RQ job enqueued on the embedded server is run by a worker and returns its value."""
    with EmbeddedRedis(tmp_path, persist=False) as server:
        assert server.url is not None
        client = redis.Redis.from_url(server.url)
        queue = Queue("test", connection=client)
        job = queue.enqueue(add, 2, 3)
        SimpleWorker([queue], connection=client).work(burst=True)
        assert job.return_value() == 5
        client.close()


def test_second_process_attaches_instead_of_starting(tmp_path: Path) -> None:
    """A second user of the same folder shares the running server and does not stop it."""
    with EmbeddedRedis(tmp_path, persist=False) as owner:
        attached = EmbeddedRedis(tmp_path)
        assert attached.start() == owner.url
        assert not attached.owned
        attached.stop()
        assert owner.pid is not None
        assert pid_alive(owner.pid)
    assert not (tmp_path / URL_FILE).exists()


def test_stop_leaves_no_process(tmp_path: Path) -> None:
    """Stopping the owner ends the redis-server process."""
    server = EmbeddedRedis(tmp_path, persist=False)
    server.start()
    pid = server.pid
    assert pid is not None
    server.stop()
    assert wait_gone(pid)


def test_data_survives_a_restart_when_persistent(tmp_path: Path) -> None:
    """With persistence on, a value written before a stop is there after the next start."""
    with EmbeddedRedis(tmp_path) as first:
        assert first.url is not None
        redis.Redis.from_url(first.url).set("kept", "yes")
    with EmbeddedRedis(tmp_path) as second:
        assert second.url is not None
        assert redis.Redis.from_url(second.url).get("kept") == b"yes"


_OWNER_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from gencoach.runtime.embedded_redis import EmbeddedRedis
    server = EmbeddedRedis(Path(sys.argv[1]), persist=False)
    server.start()
    print(server.pid, flush=True)
    if sys.argv[2] == "wait":
        time.sleep(60)
    """
)


@pytest.mark.parametrize("ending", ["exit", "sigkill"])
def test_server_dies_with_its_owner(tmp_path: Path, ending: str) -> None:
    """An owner that exits without stopping, or is SIGKILLed, takes its server with it."""
    mode = "exit" if ending == "exit" else "wait"
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER_SCRIPT, str(tmp_path), mode],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert owner.stdout is not None
    server_pid = int(owner.stdout.readline())
    assert pid_alive(server_pid)
    if ending == "sigkill":
        os.kill(owner.pid, signal.SIGKILL)
    owner.wait(10)
    owner.stdout.close()
    assert wait_gone(server_pid)


def test_unusable_binary_is_reported(tmp_path: Path) -> None:
    """A binary that cannot serve fails start() with an error naming it."""
    fake = tmp_path / "redis-server"
    fake.write_text("#!/bin/sh\necho 'cannot start here' >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(EmbeddedRedisError, match=r"redis-server\) exited at start-up"):
        EmbeddedRedis(tmp_path / "data", binary=fake).start()
