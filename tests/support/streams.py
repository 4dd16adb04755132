"""Reading Redis streams in tests, typed as what the tests' clients return (no
`decode_responses`: ids and fields are bytes), where redis-py types its replies for
every client mode at once."""

from __future__ import annotations

import json
from typing import Any, cast

import redis
import redis.asyncio

from gencoach.constants import EVENT_FIELD, Keys

Entry = tuple[bytes, dict[bytes, bytes]]
"""A stream entry: its id and its fields."""


def entries(client: redis.Redis, stream: str) -> list[Entry]:
    """Every entry of the stream, oldest first (none when it does not exist)."""
    return cast(list[Entry], client.xrange(stream))


def reported_events(client: redis.Redis) -> list[dict[str, Any]]:
    """Every event on the events stream, in order."""
    return [
        json.loads(fields[EVENT_FIELD.encode()]) for _, fields in entries(client, Keys().events)
    ]


async def async_entries(client: redis.asyncio.Redis, stream: str) -> list[Entry]:
    """Every entry of the stream, oldest first, read with an asyncio client."""
    return cast(list[Entry], await client.xrange(stream))


def read_group(
    client: redis.Redis, group: str, consumer: str, stream: str, count: int | None = None
) -> list[Entry]:
    """The entries the group delivers to `consumer` now (`XREADGROUP ... >`), none waiting."""
    reply = client.xreadgroup(group, consumer, {stream: ">"}, count=count)
    return cast(list[tuple[bytes, list[Entry]]], reply)[0][1] if reply else []


async def async_read_group(
    client: redis.asyncio.Redis, group: str, consumer: str, stream: str, count: int | None = None
) -> list[Entry]:
    """`read_group` with an asyncio client."""
    reply = await client.xreadgroup(group, consumer, {stream: ">"}, count=count)
    return cast(list[tuple[bytes, list[Entry]]], reply)[0][1] if reply else []
