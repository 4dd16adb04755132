"""The memory of write-once graph nodes: bounded in size and in time."""

from __future__ import annotations

from gencoach.service.store.nodecache import WriteOnceCache


def test_the_oldest_entry_goes_beyond_the_bound() -> None:
    cache: WriteOnceCache[int] = WriteOnceCache(max_entries=2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("c", 3)
    assert (cache.get("a"), cache.get("b"), cache.get("c"), len(cache)) == (None, 2, 3, 2)


def test_an_entry_lives_at_most_its_ttl() -> None:
    now = [0.0]
    cache: WriteOnceCache[str] = WriteOnceCache(ttl_s=10, clock=lambda: now[0])
    cache.put(("run", "1"), "node")
    now[0] = 9.0
    assert cache.get(("run", "1")) == "node"
    now[0] = 10.5
    assert cache.get(("run", "1")) is None
    assert len(cache) == 0
