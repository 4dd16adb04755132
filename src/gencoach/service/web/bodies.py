"""Reading a JSON request body: its Content-Type, and every key of an object once.

A body route reads JSON only: any other Content-Type is answered 415
(`gencoach.protocol.media` says why). An object that repeats a key is refused with 422
naming it, rather than keeping the last value as JSON parsers do.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request

from gencoach.protocol.media import not_json_refusal


class BodyRefusedError(Exception):
    """A request body refused before the route looks at it: the status and the reason."""

    def __init__(self, status: int, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.extra = extra


class _DuplicateKeyError(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _DuplicateKeyError(key)
        found[key] = value
    return found


def duplicate_key(raw: bytes) -> str | None:
    """The first key an object of this JSON text repeats, or None (also for invalid JSON)."""
    try:
        json.loads(raw, object_pairs_hook=_unique_pairs)
    except _DuplicateKeyError as duplicate:
        return duplicate.key
    except ValueError:
        return None  # not JSON: the route's parser says why
    return None


async def json_body(request: Request) -> bytes:
    """The request's body, once its Content-Type is JSON and no object repeats a key."""
    refusal = not_json_refusal(request.headers.get("content-type"))
    if refusal is not None:
        raise BodyRefusedError(415, refusal)
    raw = await request.body()
    key = duplicate_key(raw)
    if key is not None:
        detail = f"the body repeats the key {key!r}; each key of an object may appear once"
        raise BodyRefusedError(422, detail, errors=[{"field": key, "reason": "duplicate key"}])
    return raw
