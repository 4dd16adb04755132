"""The node caches are bounded by configuration, in count and in time, whether or not their
entries are read again."""

from __future__ import annotations

from pathlib import Path

import pytest

from gencoach.config import load_settings
from gencoach.errors import ConfigError
from gencoach.service.store.nodecache import WriteOnceCache


def test_entries_never_read_again_expire_as_new_ones_come() -> None:
    """A controller that writes nodes it never reads again holds only the last `ttl_s` of
    them, not `max_entries`."""
    now = [0.0]
    cache: WriteOnceCache[int] = WriteOnceCache(
        max_entries=1_000_000, ttl_s=30, clock=lambda: now[0]
    )
    for minute in range(10):
        now[0] = minute * 60.0
        for index in range(1000):
            cache.put((minute, index), index)
    assert len(cache) == 1000  # the last minute's, the earlier ones gone unread
    assert cache.get((9, 999)) == 999


def test_the_bounds_are_settings_refused_when_not_positive(tmp_path: Path) -> None:
    """`controller.node_cache_entries` and `controller.node_cache_ttl_s` are read from the
    configuration, and a zero is refused naming the key."""
    config = tmp_path / "gencoach.yaml"
    config.write_text("controller: {node_cache_entries: 500, node_cache_ttl_s: 30}\n")
    section = load_settings(config, {}).controller
    assert (section.node_cache_entries, section.node_cache_ttl_s) == (500, 30.0)
    config.write_text("controller: {node_cache_entries: 0}\n")
    with pytest.raises(ConfigError, match=r"controller\.node_cache_entries"):
        load_settings(config, {})
