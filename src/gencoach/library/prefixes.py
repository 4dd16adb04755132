"""Shared prefixes: a record stored as the tail of an earlier record of its source.

`PrefixEncoder` picks, for each record, the anchor (a record stored whole) it shares the
most events with; `PrefixReader` completes a stored tail from its anchor. See
docs/library.md ("On disk").
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final

PREFIX: Final = "prefix"
SHARED_KEYS: Final = ("system", "tools", "task", "environment", "agent", "benchmark")
ANCHORS_PER_SOURCE: Final = 8
_CACHED_ANCHORS: Final = 512


def _dump(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class PrefixEncoder:
    """Chooses, for each record of one source, the anchor it shares the most events with."""

    def __init__(self) -> None:
        self._anchors: list[tuple[int, int, list[str], dict[str, str]]] = []

    def reset(self) -> None:
        """Forget the anchors (a new source, or a new shard)."""
        self._anchors.clear()

    def encode(self, payload: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """The form to store (the payload itself, or its tail), and its events as JSON.

        A tail carries `prefix`: the anchor's position in the same shard (`offset`,
        `length`), how many of its events it shares (`events`), and which top-level
        values are the anchor's (`keys`); its own `events` are then only the rest.
        """
        events = [_dump(event) for event in payload["events"]]
        best, shared = None, 0
        for anchor in self._anchors:
            held = anchor[2]
            count = 0
            for mine, theirs in zip(events, held, strict=False):
                if mine != theirs:
                    break
                count += 1
            if count > shared:
                best, shared = anchor, count
        if best is None:
            return payload, events
        offset, length, _, values = best
        keys = [key for key in SHARED_KEYS if _dump(payload[key]) == values[key]]
        stored = {key: value for key, value in payload.items() if key not in keys}
        stored["events"] = payload["events"][shared:]
        stored[PREFIX] = {"offset": offset, "length": length, "events": shared, "keys": keys}
        return stored, events

    def anchored(self, payload: dict[str, Any], events: list[str], where: tuple[int, int]) -> None:
        """Remember a record stored whole at (offset, length) as an anchor."""
        values = {key: _dump(payload[key]) for key in SHARED_KEYS}
        self._anchors.append((*where, events, values))
        if len(self._anchors) > ANCHORS_PER_SOURCE:
            self._anchors.pop(0)


class PrefixReader:
    """Completes stored tails from their anchors, keeping recent anchors parsed. Anchors
    are always stored whole, so reading a record takes at most one more read."""

    def __init__(self) -> None:
        self._cache: OrderedDict[tuple[str, int], dict[str, Any]] = OrderedDict()

    def complete(
        self, shard: str, stored: dict[str, Any], read: Callable[[int, int], bytes]
    ) -> dict[str, Any]:
        """The whole payload of a stored record (`read(offset, length)` reads its shard)."""
        reference = stored.pop(PREFIX, None)
        if reference is None:
            return stored
        key = (shard, reference["offset"])
        anchor = self._cache.get(key)
        if anchor is None:
            anchor = json.loads(read(reference["offset"], reference["length"]))
            self._cache[key] = anchor
            if len(self._cache) > _CACHED_ANCHORS:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        stored["events"] = anchor["events"][: reference["events"]] + stored["events"]
        for name in reference["keys"]:
            stored[name] = anchor[name]
        return stored
