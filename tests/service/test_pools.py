"""The controller's Redis pools: which calls time out, and how a dead connection is found."""

from __future__ import annotations

import socket

import pytest
from redis.asyncio import Redis

from gencoach.runtime.connections import DEAD_PEER_S
from gencoach.service.pools import API_SOCKET_TIMEOUT_S, pooled_client

pytestmark = pytest.mark.asyncio


async def _connection_socket(client: Redis) -> tuple[float | None, socket.socket]:
    await client.ping()
    connection = client.connection_pool._available_connections[0]
    assert connection._writer is not None
    sock = connection._writer.transport.get_extra_info("socket")
    return connection.socket_timeout, sock


async def test_the_loops_wait_for_redis_and_find_a_dead_connection_by_tcp(
    redis_url: str,
) -> None:
    """The loops' calls have no socket timeout; their connections are kept alive by TCP
    and give up on an unacknowledged command after `DEAD_PEER_S` (on Linux)."""
    client = pooled_client(redis_url, 4, 5.0, None)
    try:
        timeout, sock = await _connection_socket(client)
        assert timeout is None
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        if hasattr(socket, "TCP_USER_TIMEOUT"):
            user_timeout = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT)
            assert user_timeout == DEAD_PEER_S * 1000
    finally:
        await client.aclose(close_connection_pool=True)


async def test_the_apis_calls_time_out(redis_url: str) -> None:
    """The API's calls give up after `API_SOCKET_TIMEOUT_S`, so a client hears 503."""
    client = pooled_client(redis_url, 4, 5.0, API_SOCKET_TIMEOUT_S)
    try:
        timeout, _ = await _connection_socket(client)
        assert timeout == API_SOCKET_TIMEOUT_S
    finally:
        await client.aclose(close_connection_pool=True)
