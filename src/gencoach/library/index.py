"""The read-only view of `index.sqlite`: light rows per trajectory, selected by a query.

The database is opened with `mode=ro`, so nothing a consumer does can change it. A
query's rows come back in the library's canonical order (task, environment, rank, id),
which depends only on the content of the library, never on how its files were laid out.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, NamedTuple

from gencoach.library.errors import LibraryError
from gencoach.library.query import DatasetQuery, Selection
from gencoach.library.records import Contributor, Outcome

_COLUMNS = (
    "t.id, t.task_key, t.environment_key, t.scenario, t.target, t.source_id, "
    "t.source_revision, t.agent, t.provenance, t.outcome, t.quality_tier, t.reward, "
    "t.decisions, t.targets, t.structural, t.training, r.rank, r.task_rank, s.split, "
    "t.shard, t.offset, t.length, coalesce(d.contributions, 1)"
)
_FROM = (
    "FROM trajectories t JOIN ranks r ON r.id = t.id JOIN splits s ON s.task_key = t.task_key "
    "LEFT JOIN shared d ON d.trajectory_id = t.id"
)
_ORDER = "ORDER BY t.task_key, t.environment_key, r.rank, t.id"


class IndexRow(NamedTuple):
    """What the index knows of one trajectory: enough to filter, sample and locate it."""

    id: str
    task_key: str
    environment_key: str
    scenario: str
    target: str
    source_id: str
    source_revision: str
    agent: str
    provenance: str
    outcome: str
    quality_tier: str
    reward: float | None
    decisions: int
    targets: int
    structural: int
    """1 when the record is structurally sound, else 0."""
    training: int
    """1 when it is eligible for training, else 0."""
    rank: int
    task_rank: int
    split: str
    shard: str
    offset: int
    length: int
    contributions: int
    """How many sources produced this content (more than 1: duplicates were collapsed)."""


def _in(column: str, values: tuple[Any, ...], where: list[str], params: list[Any]) -> None:
    if values:
        where.append(f"{column} IN ({', '.join('?' * len(values))})")
        params.extend(str(value) for value in values)


def _where(query: DatasetQuery) -> tuple[str, list[Any]]:
    where: list[str] = []
    params: list[Any] = []
    _in("t.scenario", query.scenarios, where, params)
    _in("t.target", query.targets, where, params)
    _in("t.task_key", query.task_keys, where, params)
    _in("t.environment_key", query.environment_keys, where, params)
    _in("t.source_id", query.source_ids, where, params)
    _in("t.source_revision", query.source_revisions, where, params)
    if query.agents:
        where.append(
            "(t.agent IN ({0}) OR substr(t.agent, 1, instr(t.agent, '@') - 1) IN ({0}))".format(
                ", ".join("?" * len(query.agents))
            )
        )
        params.extend([*query.agents, *query.agents])
    _in("s.split", query.splits, where, params)
    if query.excluded_splits:
        where.append(f"s.split NOT IN ({', '.join('?' * len(query.excluded_splits))})")
        params.extend(str(split) for split in query.excluded_splits)
    _in("t.provenance", query.provenance, where, params)
    _in("t.outcome", query.outcomes, where, params)
    _in("t.quality_tier", query.quality_tiers, where, params)
    if query.routes:
        marks = ", ".join("?" * len(query.routes))
        where.append(f"t.id IN (SELECT trajectory_id FROM routes WHERE route IN ({marks}))")  # noqa: S608
        params.extend(query.routes)
    if query.views:
        # Both views need a trainable decision to aim at; a record without one has none.
        where.append("t.targets > 0")
    if query.selection is not Selection.ALL_ATTEMPTS:
        where.append("t.outcome = ?")
        params.append(Outcome.SUCCESS.value)
    if query.structural_only:
        where.append("t.structural = 1")
    if query.training_only:
        where.append("t.training = 1")
    return (" WHERE " + " AND ".join(where)) if where else "", params


class IndexReader:
    """`index.sqlite`, opened read-only."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
            self._db.execute("SELECT count(*) FROM trajectories JOIN ranks USING (id)").fetchone()
        except sqlite3.Error as error:
            raise LibraryError(path, f"cannot be read as a library index: {error}") from None

    def close(self) -> None:
        """Close the connection."""
        self._db.close()

    def select(self, query: DatasetQuery) -> list[IndexRow]:
        """The rows `query` selects, in canonical order."""
        where, params = _where(query)
        if query.selection is not Selection.BEST_VERIFIED:
            cursor = self._db.execute(f"SELECT {_COLUMNS} {_FROM}{where} {_ORDER}", params)
            return list(map(IndexRow._make, cursor))
        # The best matching row of each task (lowest task rank), picked inside SQLite.
        best = "row_number() OVER (PARTITION BY t.task_key ORDER BY r.task_rank, t.id) AS pick"
        cursor = self._db.execute(
            f"SELECT * FROM (SELECT {_COLUMNS}, t.environment_key AS e, r.rank AS k, {best} "  # noqa: S608
            f"{_FROM}{where}) WHERE pick = 1 ORDER BY 2, e, k, 1",
            params,
        )
        return [IndexRow._make(values[:-3]) for values in cursor]

    def row(self, trajectory_id: str) -> IndexRow | None:
        """One trajectory's row, or None."""
        cursor = self._db.execute(f"SELECT {_COLUMNS} {_FROM} WHERE t.id = ?", (trajectory_id,))
        values = cursor.fetchone()
        return None if values is None else IndexRow._make(values)

    def contributors(self, trajectory_id: str) -> tuple[Contributor, ...]:
        """Every source that produced this content, in a stable order."""
        cursor = self._db.execute(
            "SELECT source_id, source_revision, locator FROM contributors "
            "WHERE trajectory_id = ? ORDER BY source_id, source_revision, locator",
            (trajectory_id,),
        )
        return tuple(Contributor(sid, rev, json.loads(loc)) for sid, rev, loc in cursor)

    def routes(self, trajectory_id: str) -> list[str]:
        """The coaching routes a trajectory went through."""
        cursor = self._db.execute(
            "SELECT route FROM routes WHERE trajectory_id = ? ORDER BY route", (trajectory_id,)
        )
        return [route for (route,) in cursor]

    def group_counts(self, column: str) -> dict[str, int]:
        """Trajectories per value of a whitelisted column."""
        allowed = {"split": "s.split", "outcome": "t.outcome", "quality_tier": "t.quality_tier",
                   "provenance": "t.provenance", "scenario": "t.scenario"}  # fmt: skip
        cursor = self._db.execute(
            f"SELECT {allowed[column]}, count(*) {_FROM} GROUP BY 1 ORDER BY 1"
        )
        return dict(cursor.fetchall())
