"""Where Redis is (the configured server, or the embedded one under the output dir), and
how the service's own clients connect to it (`connection_options`)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis
import redis.exceptions

from gencoach.errors import RedisError
from gencoach.runtime.embedded_redis import URL_FILE, EmbeddedRedis
from gencoach.runtime.logs import get_logger, redact
from gencoach.runtime.retrying import no_client_retries

EMBEDDED = "embedded"
EMBEDDED_DIR = ".redis"
DEAD_PEER_S = 45
"""How long a connection to a Redis that went away (its host, or the network) lives on."""

log = get_logger("connections")


def connection_options(socket_timeout_s: float | None) -> dict[str, Any]:
    """redis-py's connection keywords for a client whose calls wait `socket_timeout_s`
    (None: as long as it takes) for an answer, and which finds a Redis that went away
    within `DEAD_PEER_S` regardless: an idle connection is probed after 30 s (every 5 s,
    3 times), and where the platform has it (`TCP_USER_TIMEOUT`), one whose sent command
    stays unacknowledged fails then instead of after the kernel's quarter of an hour of
    retransmissions."""
    wanted = {
        "TCP_KEEPIDLE": 30,
        "TCP_KEEPINTVL": 5,
        "TCP_KEEPCNT": 3,
        "TCP_USER_TIMEOUT": DEAD_PEER_S * 1000,
    }
    keepalive = {
        getattr(socket, name): value for name, value in wanted.items() if hasattr(socket, name)
    }
    return {
        "socket_timeout": socket_timeout_s,
        "socket_keepalive": True,
        "socket_keepalive_options": keepalive,
    }


def embedded_dir(output_dir: Path) -> Path:
    """The folder holding the embedded server's data for an output dir."""
    return output_dir / EMBEDDED_DIR


@contextmanager
def redis_url(configured: str, output_dir: Path, *, start: bool = True) -> Iterator[str]:
    """Yield a reachable Redis URL, starting the embedded server for the block if needed.

    With `start` false, an embedded Redis must already run for `output_dir` (the one
    `gencoach serve` started): a process that only makes sense beside the controller
    attaches to it, or fails saying so, rather than starting a private server.
    """
    if configured != EMBEDDED:
        check_reachable(configured)
        yield configured
        return
    if not start:
        yield running_embedded(output_dir)
        return
    with EmbeddedRedis(embedded_dir(output_dir)) as server:
        assert server.url is not None
        log.info("redis.embedded", url=server.url, owned=server.owned, pid=server.pid)
        yield server.url


def running_embedded(output_dir: Path) -> str:
    """The URL of the embedded Redis running for `output_dir`, or RedisError saying none does."""
    url_file = embedded_dir(output_dir) / URL_FILE
    url = url_file.read_text().strip() if url_file.is_file() else ""
    if url:
        try:
            check_reachable(url, timeout_s=1.0)
        except RedisError:
            url = ""
    if not url:
        raise RedisError(
            f"no embedded Redis runs for output dir {output_dir}: start `gencoach serve` "
            "with the same configuration first, or set redis.url to a shared Redis"
        )
    return url


def check_reachable(url: str, timeout_s: float = 3.0) -> None:
    """Raise RedisError, naming the URL without its password, unless the server answers.

    A server answering LOADING (restarted, reading its append-only file) is there: the
    process that asked waits for it with its own retries (`gencoach.runtime.retrying`).
    """
    client = redis.Redis.from_url(
        url,
        socket_connect_timeout=timeout_s,
        socket_timeout=timeout_s,
        retry=no_client_retries(),
    )
    try:
        client.ping()
    except redis.exceptions.BusyLoadingError:
        log.info("redis.loading", url=redact(url))
    except redis.RedisError as error:
        shown = redact(url)
        raise RedisError(f"Redis at {shown} is unreachable: {error}", shown) from None
    finally:
        client.close()
