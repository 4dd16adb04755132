"""Library-wide facts kept in the index: ranks within groups, and one split per task.

`rerank` recomputes the ranks of the tasks a build or an append touches and gives new
tasks a split (`split_of`). See docs/library.md ("Splits").
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable, Mapping
from typing import Final

from gencoach.library.records import Split

DEFAULT_SPLIT_RATIOS: Final[Mapping[str, float]] = {
    Split.TRAIN.value: 0.8,
    Split.VALIDATION.value: 0.1,
    Split.TEST.value: 0.05,
    Split.PROTECTED_EVALUATION.value: 0.05,
}

# Tier, then reward (missing last), then stages passed, then fewer decisions, then id: the
# content alone decides, so a rebuild and an append give the same ranks.
_QUALITY = "tier_order, reward IS NULL, reward DESC, stages_passed DESC, decisions, id"


def check_ratios(ratios: Mapping[str, float]) -> dict[str, float]:
    """The ratios in split order; every split named, none negative, summing to 1."""
    names = [split.value for split in Split]
    if sorted(ratios) != sorted(names):
        raise ValueError(f"split ratios must name exactly {', '.join(names)}")
    if any(value < 0 for value in ratios.values()):
        raise ValueError("split ratios cannot be negative")
    if abs(sum(ratios.values()) - 1) > 1e-9:
        raise ValueError(f"split ratios must sum to 1, not {sum(ratios.values())}")
    return {name: float(ratios[name]) for name in names}


def split_of(task_key: str, seed: int, ratios: Mapping[str, float]) -> str:
    """The split of a task: where a seeded hash of its key falls among the ratios, so it is
    the same whatever else the library holds."""
    digest = hashlib.sha256(f"{seed}:{task_key}".encode()).digest()
    point = int.from_bytes(digest[:8], "big") / 2**64
    cumulative = 0.0
    chosen = Split.TRAIN.value
    for name, ratio in ratios.items():
        if ratio <= 0:
            continue
        chosen = name
        cumulative += ratio
        if point < cumulative:
            break
    return chosen


def rerank(
    db: sqlite3.Connection, tasks: Iterable[str], seed: int, ratios: Mapping[str, float]
) -> None:
    """Recompute the ranks of `tasks` and give the new ones among them a split.

    Ranks order a task/environment group (`rank`) and a whole task (`task_rank`).
    """
    db.execute("CREATE TEMP TABLE IF NOT EXISTS affected (task_key TEXT PRIMARY KEY)")
    db.execute("DELETE FROM affected")
    db.executemany("INSERT OR IGNORE INTO affected VALUES (?)", ((task,) for task in tasks))
    db.execute("DELETE FROM ranks WHERE task_key IN (SELECT task_key FROM affected)")
    db.execute(
        f"INSERT INTO ranks (id, task_key, rank, task_rank) SELECT id, task_key, "  # noqa: S608
        f"row_number() OVER (PARTITION BY task_key, environment_key ORDER BY {_QUALITY}), "
        f"row_number() OVER (PARTITION BY task_key ORDER BY {_QUALITY}) "
        "FROM trajectories WHERE task_key IN (SELECT task_key FROM affected)"
    )
    new = [
        (task, split_of(task, seed, ratios))
        for (task,) in db.execute(
            "SELECT task_key FROM affected WHERE task_key NOT IN (SELECT task_key FROM splits)"
        )
    ]
    db.executemany("INSERT INTO splits (task_key, split) VALUES (?, ?)", new)
