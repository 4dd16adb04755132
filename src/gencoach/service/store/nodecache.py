"""A bounded memory of the graph nodes that never change once written.

`WriteOnceCache` keeps at most `controller.node_cache_entries` parsed nodes for
`controller.node_cache_ttl_s` each (docs/operations.md, "Bounded state").
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")

# The defaults of `controller.node_cache_entries` and `controller.node_cache_ttl_s`.
MAX_ENTRIES = 10_000
TTL_S = 300.0


class WriteOnceCache(Generic[V]):
    """At most `max_entries` values for `ttl_s` each; the oldest entry goes first.

    A run's situations and candidates are written once, when their event is applied, and an
    execution once, when its candidate is executed; the coaching path reads the same lineage
    several times per request (routing, the repair job, the reinjection, the proof).
    Remembering the parsed nodes spares those reads and their parsing. `GraphStore` keys
    entries by the run's start (its id and the server's time of `run.started` to the
    microsecond, `generation` in its meta), so a run id used again after its keys expired
    never meets the nodes of its namesake.

    An entry older than `ttl_s` is dropped when it is read and, because every entry lives
    as long, by every `put` from the oldest end, so entries that are never read again do
    not stay until the count pushes them out.
    """

    def __init__(
        self,
        max_entries: int = MAX_ENTRIES,
        ttl_s: float = TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_entries = max_entries
        self.ttl_s = ttl_s
        self.clock = clock
        # Oldest first (OrderedDict: taking from the front costs O(1) however many went).
        self._entries: OrderedDict[Hashable, tuple[float, V]] = OrderedDict()

    def get(self, key: Hashable) -> V | None:
        """The value remembered for `key`, or None when absent or too old."""
        found = self._entries.get(key)
        if found is None:
            return None
        expires_at, value = found
        if expires_at < self.clock():
            del self._entries[key]
            return None
        return value

    def put(self, key: Hashable, value: V) -> None:
        """Remember `value` for `key`, forgetting the expired entries and the oldest beyond
        the bound (entries are kept in the order they expire: each lives `ttl_s`)."""
        now = self.clock()
        self._entries.pop(key, None)
        self._entries[key] = (now + self.ttl_s, value)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
        while self._entries:
            oldest = next(iter(self._entries))
            if self._entries[oldest][0] >= now:
                break
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
