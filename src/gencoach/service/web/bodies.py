"""Reading a JSON request body: its Content-Type, and every key of an object once.

`json_body` returns the body once it is JSON in UTF-8 with no repeated key, else raises
`BodyRefusedError` (415 or 422). What clients see: docs/http-api.md.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request

from gencoach.protocol.media import not_json_refusal

# Charsets whose text is read the same as UTF-8 (ASCII is a subset of it).
UTF8_CHARSETS = frozenset({"utf-8", "utf8", "us-ascii", "ascii"})


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
    """The first key an object of this JSON text repeats, or None (also for invalid JSON).

    Such a body is refused rather than read keeping the last value, as JSON parsers do.
    """
    try:
        json.loads(raw, object_pairs_hook=_unique_pairs)
    except _DuplicateKeyError as duplicate:
        return duplicate.key
    except ValueError:
        return None  # not JSON: the route's parser says why
    return None


def declared_charset(content_type: str | None) -> str | None:
    """The `charset` parameter of a Content-Type header, lower-cased and unquoted, or None."""
    for parameter in (content_type or "").split(";")[1:]:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip('"').strip().lower()
    return None


def charset_refusal(content_type: str | None) -> str | None:
    """Why a JSON body declared in this charset is refused (415), or None for UTF-8.

    JSON between systems is UTF-8 (RFC 8259) and the body is decoded as UTF-8, so a
    `charset=latin-1` body would be read as other text than its sender meant.
    """
    charset = declared_charset(content_type)
    if charset is None or charset in UTF8_CHARSETS:
        return None
    return (
        f"the body must be JSON in UTF-8: send Content-Type: application/json without a "
        f"charset or with charset=utf-8 (got charset {charset!r})"
    )


async def json_body(request: Request) -> bytes:
    """The request's body, once its Content-Type is JSON in UTF-8 and no object repeats a
    key."""
    content_type = request.headers.get("content-type")
    refusal = not_json_refusal(content_type) or charset_refusal(content_type)
    if refusal is not None:
        raise BodyRefusedError(415, refusal)
    raw = await request.body()
    key = duplicate_key(raw)
    if key is not None:
        detail = f"the body repeats the key {key!r}; each key of an object may appear once"
        raise BodyRefusedError(422, detail, errors=[{"field": key, "reason": "duplicate key"}])
    return raw
