"""What a library folder holds, its format versions and the index schema.

The file names (`MANIFEST_FILE`, `INDEX_FILE`, `shard_name`), `FORMAT_VERSION`,
`API_VERSION` and the SQLite `SCHEMA`. The folder's layout: docs/library.md ("On disk").
"""

from __future__ import annotations

from typing import Final

FORMAT_NAME: Final = "gencoach-trajectory-library"
FORMAT_VERSION: Final = 2
"""The on-disk format; a reader refuses any other."""
API_VERSION: Final = "1.3"
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
    benchmark TEXT NOT NULL,
    scenario TEXT NOT NULL,
    target TEXT NOT NULL,
    source_id TEXT NOT NULL,
    source_revision TEXT NOT NULL,
    source_split TEXT,
    locator TEXT NOT NULL,
    contributor TEXT NOT NULL,
    agent_model TEXT NOT NULL,
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
    verification_method TEXT NOT NULL,
    verification_strength TEXT NOT NULL,
    replayed INTEGER NOT NULL,
    selections TEXT NOT NULL,
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
CREATE TABLE selections (
    trajectory_id TEXT NOT NULL,
    selection TEXT NOT NULL,
    PRIMARY KEY (trajectory_id, selection)
) WITHOUT ROWID;
CREATE TABLE contributors (
    trajectory_id TEXT NOT NULL,
    contributor_id TEXT NOT NULL,
    source_id TEXT NOT NULL,
    source_revision TEXT NOT NULL,
    locator TEXT NOT NULL,
    PRIMARY KEY (trajectory_id, contributor_id)
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
    content TEXT NOT NULL,
    trajectories INTEGER NOT NULL,
    accepted INTEGER NOT NULL,
    duplicates INTEGER NOT NULL,
    PRIMARY KEY (source_id, source_revision)
) WITHOUT ROWID;
CREATE TABLE permissions (
    source_id TEXT PRIMARY KEY,
    research TEXT NOT NULL,
    model_training TEXT NOT NULL,
    commercial_training TEXT NOT NULL,
    transformed_redistribution TEXT NOT NULL,
    training_verification TEXT NOT NULL,
    conditions TEXT NOT NULL,
    audit TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX trajectories_task ON trajectories (task_key, environment_key);
CREATE INDEX trajectories_scenario ON trajectories (scenario, target);
CREATE INDEX routes_route ON routes (route);
CREATE INDEX contributors_id ON contributors (contributor_id);
"""
