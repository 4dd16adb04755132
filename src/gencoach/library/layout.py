"""What a library folder holds, its format versions and the index schema.

```
LIB/
  manifest.json        versions, release, split settings, index and shard hashes (written last)
  index.sqlite         one row per trajectory, ranks, splits, routes, contributors
                       (and which records have several), sources
  shards/NNNNNN.jsonl  canonical payloads, one JSON object per line
  append_report.json   only in a library made by `append`
```
"""

from __future__ import annotations

from typing import Final

FORMAT_NAME: Final = "gencoach-trajectory-library"
FORMAT_VERSION: Final = 1
"""The on-disk format; a reader refuses any other."""
API_VERSION: Final = "1.0"
"""The consumer API (`CanonicalDatasetAdapter` and friends), versioned on its own."""

MANIFEST_FILE: Final = "manifest.json"
INDEX_FILE: Final = "index.sqlite"
SHARDS_DIR: Final = "shards"
APPEND_REPORT_FILE: Final = "append_report.json"


def shard_name(number: int) -> str:
    """The path of shard `number`, relative to the library folder."""
    return f"{SHARDS_DIR}/{number:06d}.jsonl"


SCHEMA: Final = """
CREATE TABLE trajectories (
    id TEXT PRIMARY KEY,
    task_key TEXT NOT NULL,
    environment_key TEXT NOT NULL,
    scenario TEXT NOT NULL,
    target TEXT NOT NULL,
    source_id TEXT NOT NULL,
    source_revision TEXT NOT NULL,
    agent TEXT NOT NULL,
    provenance TEXT NOT NULL,
    outcome TEXT NOT NULL,
    quality_tier TEXT NOT NULL,
    tier_order INTEGER NOT NULL,
    reward REAL,
    stages_passed INTEGER NOT NULL,
    decisions INTEGER NOT NULL,
    targets INTEGER NOT NULL,
    events INTEGER NOT NULL,
    structural INTEGER NOT NULL,
    training INTEGER NOT NULL,
    shard TEXT NOT NULL,
    offset INTEGER NOT NULL,
    length INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE ranks (
    id TEXT PRIMARY KEY,
    task_key TEXT NOT NULL,
    rank INTEGER NOT NULL,
    task_rank INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE splits (task_key TEXT PRIMARY KEY, split TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE routes (
    trajectory_id TEXT NOT NULL,
    route TEXT NOT NULL,
    PRIMARY KEY (trajectory_id, route)
) WITHOUT ROWID;
CREATE TABLE contributors (
    trajectory_id TEXT NOT NULL,
    source_id TEXT NOT NULL,
    source_revision TEXT NOT NULL,
    locator TEXT NOT NULL,
    PRIMARY KEY (trajectory_id, source_id, source_revision, locator)
) WITHOUT ROWID;
CREATE TABLE shared (
    trajectory_id TEXT PRIMARY KEY,
    contributions INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE sources (
    source_id TEXT NOT NULL,
    source_revision TEXT NOT NULL,
    kind TEXT NOT NULL,
    location TEXT NOT NULL,
    release TEXT NOT NULL,
    trajectories INTEGER NOT NULL,
    accepted INTEGER NOT NULL,
    duplicates INTEGER NOT NULL,
    PRIMARY KEY (source_id, source_revision)
) WITHOUT ROWID;
CREATE INDEX trajectories_task ON trajectories (task_key, environment_key);
CREATE INDEX trajectories_scenario ON trajectories (scenario, target);
CREATE INDEX routes_route ON routes (route);
"""
