"""Finding Redis: a configured server is checked, the embedded one is started on demand."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from gencoach.errors import RedisError
from gencoach.runtime.connections import embedded_dir
from gencoach.runtime.connections import redis_url as resolve_redis_url
from tests.support.processes import free_port
from tests.support.slow_loading import SlowLoadingRedis


def test_configured_server_is_used_as_is(redis_url: str, tmp_path: Path) -> None:
    """A reachable configured URL is handed back unchanged and nothing is started."""
    with resolve_redis_url(redis_url, tmp_path) as url:
        assert url == redis_url
    assert not embedded_dir(tmp_path).exists()


def test_unreachable_server_names_the_url_without_password(tmp_path: Path) -> None:
    """An unreachable server fails fast with its URL, its password hidden."""
    url = f"redis://user:s3cret@127.0.0.1:{free_port()}/0"
    block = resolve_redis_url(url, tmp_path)
    with pytest.raises(RedisError, match=r"127\.0\.0\.1:\d+/0 is unreachable") as caught:
        block.__enter__()
    assert "s3cret" not in str(caught.value)


@pytest.mark.slow
def test_embedded_server_lives_for_the_block(tmp_path: Path) -> None:
    """`embedded` starts a server under the output dir that answers inside the block only."""
    with resolve_redis_url("embedded", tmp_path) as url:
        client = redis.Redis.from_url(url)
        assert client.ping()
        client.close()
    with pytest.raises(redis.ConnectionError):
        redis.Redis.from_url(url, socket_connect_timeout=0.5).ping()


def test_attaching_without_a_running_embedded_server_says_so(tmp_path: Path) -> None:
    """With start=False and no embedded Redis for the output dir, RedisError says what to start."""
    block = resolve_redis_url("embedded", tmp_path, start=False)
    with pytest.raises(RedisError) as caught:
        block.__enter__()
    assert str(caught.value) == (
        f"no embedded Redis runs for output dir {tmp_path}: start `gencoach serve` with the "
        "same configuration first, or set redis.url to a shared Redis"
    )
    assert not embedded_dir(tmp_path).exists()


@pytest.mark.slow
def test_a_second_process_attaches_to_the_running_embedded_server(tmp_path: Path) -> None:
    """With start=False, the embedded Redis another block started for the dir is found."""
    with resolve_redis_url("embedded", tmp_path) as started:
        with resolve_redis_url("embedded", tmp_path, start=False) as attached:
            assert attached == started
        client = redis.Redis.from_url(started)
        assert client.ping()
        client.close()


@pytest.mark.slow
def test_a_server_loading_its_aof_counts_as_reachable(tmp_path: Path) -> None:
    """A restarted Redis still loading its append-only file is there: a process starting
    now (a worker, a generator) is handed its URL and waits for it, instead of exiting
    with "unreachable"."""
    server = SlowLoadingRedis(tmp_path / "redis")
    server.start()
    try:
        server.pad(5000)
        server.restart()
        assert server.loading()
        with resolve_redis_url(server.url, tmp_path) as url:
            assert url == server.url
    finally:
        server.kill()
