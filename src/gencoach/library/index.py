"""The read-only view of `index.sqlite`: `TrajectoryMetadata` rows, selected by a query.

The database is opened with `mode=ro`, so nothing a consumer does can change it; the
ids an overlay supplies go into a temporary in-memory table of this connection only.
A query's rows come back in the library's canonical order (task, environment, rank, id),
which depends only on the content of the library, never on how its files were laid out.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gencoach.library.errors import LibraryError
from gencoach.library.metadata import PermissionRecord, TrajectoryMetadata
from gencoach.library.query import DatasetQuery, TrajectorySelection
from gencoach.library.records import PERMISSION_DIMENSIONS, VERIFIED_STRENGTHS, Contributor, Outcome

_AVAILABILITY = (
    "CASE WHEN t.shard <> '' THEN 'hosted' WHEN o.id IS NOT NULL THEN 'overlay' "
    "ELSE 'metadata_only' END"
)
_COLUMNS = (
    "t.id, t.task_key, t.environment_key, t.benchmark, t.scenario, t.target, t.source_id, "
    "t.source_revision, t.source_split, t.locator, t.agent_model, t.agent, t.provenance, "
    "t.outcome, t.reward, t.quality_tier, r.rank, r.task_rank, s.split, t.structural, "
    "t.training, t.verification_method, t.verification_strength, t.replayed, t.decisions, "
    f"t.targets, t.selections, {_AVAILABILITY}, t.contributor, coalesce(d.contributions, 1), "
    "t.shard, t.offset, t.length"
)
_FROM = (
    "FROM trajectories t JOIN ranks r ON r.id = t.id JOIN splits s ON s.task_key = t.task_key "
    "LEFT JOIN shared d ON d.trajectory_id = t.id LEFT JOIN temp.overlay o ON o.id = t.id"
)
_ORDER = "ORDER BY t.task_key, t.environment_key, r.rank, t.id"
_PERMISSION_FIELDS = {
    "research_permissions": "research",
    "training_permissions": "model_training",
    "commercial_training_permissions": "commercial_training",
    "redistribution_permissions": "transformed_redistribution",
    "training_verifications": "training_verification",
}


def _in(column: str, values: tuple[Any, ...], where: list[str], params: list[Any]) -> None:
    if values:
        where.append(f"{column} IN ({', '.join('?' * len(values))})")
        params.extend(value if isinstance(value, int) else str(value) for value in values)


def _tagged(
    table: str, column: str, values: tuple[str, ...], where: list[str], params: list[Any]
) -> None:
    """Records with one of `values` in a (trajectory_id, column) table."""
    if values:
        marks = ", ".join("?" * len(values))
        where.append(f"t.id IN (SELECT trajectory_id FROM {table} WHERE {column} IN ({marks}))")  # noqa: S608
        params.extend(values)


def _where(query: DatasetQuery) -> tuple[str, list[Any]]:
    where: list[str] = []
    params: list[Any] = []
    _in("t.benchmark", query.benchmarks, where, params)
    _in("t.source_id", query.source_ids, where, params)
    _in("t.source_revision", query.source_versions, where, params)
    _in("t.agent_model", query.agent_models, where, params)
    _in("t.agent", query.agent_scaffolds, where, params)
    if query.trajectory_ids:
        marks = ", ".join("?" * len(query.trajectory_ids))
        where.append(
            f"(t.id IN ({marks}) OR t.id IN "  # noqa: S608
            f"(SELECT trajectory_id FROM contributors WHERE contributor_id IN ({marks})))"
        )
        params.extend([*query.trajectory_ids, *query.trajectory_ids])
    _in("t.task_key", query.task_keys, where, params)
    _in("t.environment_key", query.environment_keys, where, params)
    _in("s.split", query.splits, where, params)
    if query.excluded_splits:
        where.append(f"s.split NOT IN ({', '.join('?' * len(query.excluded_splits))})")
        params.extend(str(split) for split in query.excluded_splits)
    _in("t.quality_tier", query.quality_tiers, where, params)
    _in("r.rank", query.quality_ranks, where, params)
    _in("t.provenance", query.demonstration_provenance, where, params)
    _tagged("selections", "selection", query.curated_selections, where, params)
    if query.supported_views:
        # Both views need a trainable decision to aim at; a record without one has none.
        where.append("t.targets > 0")
    _in(_AVAILABILITY, query.content_availability, where, params)
    for name, column in _PERMISSION_FIELDS.items():
        _in(f"coalesce(p.{column}, 'unknown')", getattr(query, name), where, params)
    for gate, column in (
        ("structurally_eligible", "structural"),
        ("training_eligible", "training"),
    ):
        if getattr(query, gate) is not None:
            where.append(f"t.{column} = ?")
            params.append(int(getattr(query, gate)))
    _in("t.scenario", query.scenarios, where, params)
    _in("t.target", query.targets, where, params)
    if query.agents:
        where.append(
            "(t.agent IN ({0}) OR substr(t.agent, 1, instr(t.agent, '@') - 1) IN ({0}))".format(
                ", ".join("?" * len(query.agents))
            )
        )
        params.extend([*query.agents, *query.agents])
    _tagged("routes", "route", query.routes, where, params)
    _in("t.outcome", query.outcomes, where, params)
    if query.selection is not TrajectorySelection.ALL_ATTEMPTS:
        where.append("t.outcome = ?")
        params.append(Outcome.SUCCESS.value)
    if query.selection is TrajectorySelection.BEST_VERIFIED:
        _in("t.verification_strength", VERIFIED_STRENGTHS, where, params)
    return (" WHERE " + " AND ".join(where)) if where else "", params


def _needs_permissions(query: DatasetQuery) -> bool:
    return any(getattr(query, name) for name in _PERMISSION_FIELDS)


class IndexReader:
    """`index.sqlite`, opened read-only."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
            self._db.execute("PRAGMA temp_store = MEMORY")
            self._db.execute("CREATE TEMP TABLE overlay (id TEXT PRIMARY KEY) WITHOUT ROWID")
            self._db.execute("SELECT count(*) FROM trajectories JOIN ranks USING (id)").fetchone()
        except sqlite3.Error as error:
            raise LibraryError(path, f"cannot be read as a library index: {error}") from None
        self._permissions: dict[str, PermissionRecord] = {}
        for values in self._db.execute("SELECT * FROM permissions"):
            record = _permission(values)
            self._permissions[record.source_id] = record
        self._audits = dict(self._permissions)  # and the unaudited sources seen

    def close(self) -> None:
        """Close the connection."""
        self._db.close()

    def add_overlay(self, ids: Iterable[str]) -> None:
        """Mark ids whose payload an overlay supplies (in this connection's memory only)."""
        self._db.executemany("INSERT OR IGNORE INTO temp.overlay VALUES (?)", ((i,) for i in ids))

    def permissions(self, source_id: str) -> PermissionRecord:
        """The audit of a source, or an all-unknown one when none was given."""
        return self._permissions.get(source_id) or PermissionRecord.unknown(source_id)

    def _rows(self, sql: str, params: Iterable[Any], extra: int = 0) -> list[TrajectoryMetadata]:
        """Rows of `_COLUMNS` (and `extra` columns after them, dropped) as metadata."""
        rows = []
        audits = self._audits
        make = TrajectoryMetadata._make
        for values in self._db.execute(sql, tuple(params)):
            # Columns in field order; the flags, selections, audit and contributor ids made.
            (tid, source, structural, training, replayed, selections, contributor,
             contributions) = (values[0], values[6], values[19], values[20], values[23],
                               values[26], values[28], values[29])  # fmt: skip
            ids = (contributor,) if contributions == 1 else self.contributor_ids(tid)
            audit = audits.get(source)
            if audit is None:  # an unaudited source: one all-unknown record, kept
                audit = audits[source] = PermissionRecord.unknown(source)
            rows.append(
                make((
                    *values[:19], structural == 1, training == 1, values[21], values[22],
                    replayed == 1, values[24], values[25],
                    tuple(selections.split("\x1f")) if selections else (), values[27], audit,
                    ids, contributions, values[30], values[31], values[32],
                ))
            )  # fmt: skip
        return rows

    def select(self, query: DatasetQuery) -> list[TrajectoryMetadata]:
        """The rows `query` selects, in canonical order."""
        where, params = _where(query)
        source = _FROM
        if _needs_permissions(query):
            source += " LEFT JOIN permissions p ON p.source_id = t.source_id"
        if query.selection is not TrajectorySelection.BEST_VERIFIED:
            return self._rows(f"SELECT {_COLUMNS} {source}{where} {_ORDER}", params)
        # The best matching row of each task (lowest task rank), picked inside SQLite.
        best = "row_number() OVER (PARTITION BY t.task_key ORDER BY r.task_rank, t.id) AS pick"
        return self._rows(
            f"SELECT * FROM (SELECT {_COLUMNS}, t.environment_key AS e, r.rank AS k, {best} "  # noqa: S608
            f"{source}{where}) WHERE pick = 1 ORDER BY 2, e, k, 1",
            params,
            extra=3,
        )

    def row(self, trajectory_id: str) -> TrajectoryMetadata | None:
        """One trajectory's row by its canonical id or a contributing source id, or None."""
        found = self._rows(
            f"SELECT {_COLUMNS} {_FROM} WHERE t.id = ? OR t.id = "  # noqa: S608
            "(SELECT trajectory_id FROM contributors WHERE contributor_id = ? LIMIT 1)",
            (trajectory_id, trajectory_id),
        )
        return found[0] if found else None

    def contributor_ids(self, trajectory_id: str) -> tuple[str, ...]:
        """The source trajectory ids collapsed into a record, in a stable order."""
        return tuple(contributor.trajectory_id for contributor in self.contributors(trajectory_id))

    def contributors(self, trajectory_id: str) -> tuple[Contributor, ...]:
        """Every source that produced this content, in a stable order."""
        cursor = self._db.execute(
            "SELECT contributor_id, source_id, source_revision, locator FROM contributors "
            "WHERE trajectory_id = ? ORDER BY source_id, source_revision, locator",
            (trajectory_id,),
        )
        return tuple(Contributor(cid, sid, rev, json.loads(loc)) for cid, sid, rev, loc in cursor)

    def routes(self, trajectory_id: str) -> list[str]:
        """The coaching routes a trajectory went through."""
        cursor = self._db.execute(
            "SELECT route FROM routes WHERE trajectory_id = ? ORDER BY route", (trajectory_id,)
        )
        return [route for (route,) in cursor]

    def distinct(self, column: str) -> list[str]:
        """The distinct values of an inventory column, sorted."""
        sql = {
            "benchmark": "SELECT DISTINCT benchmark FROM trajectories",
            "source_id": "SELECT DISTINCT source_id FROM sources",
            "selection": "SELECT DISTINCT selection FROM selections",
        }[column]
        return sorted(value for (value,) in self._db.execute(sql))

    def source_content(self) -> dict[str, str]:
        """Each source id's content as built: `hosted` or `metadata_only`."""
        found: dict[str, str] = {}
        for source_id, content in self._db.execute("SELECT source_id, content FROM sources"):
            if found.get(source_id) != "hosted":
                found[source_id] = content
        return found

    def group_counts(self, column: str) -> dict[str, int]:
        """Trajectories per value of a whitelisted column."""
        allowed = {"split": "s.split", "outcome": "t.outcome", "quality_tier": "t.quality_tier",
                   "provenance": "t.provenance", "scenario": "t.scenario",
                   "benchmark": "t.benchmark", "source_id": "t.source_id"}  # fmt: skip
        cursor = self._db.execute(
            f"SELECT {allowed[column]}, count(*) {_FROM} GROUP BY 1 ORDER BY 1"
        )
        return dict(cursor.fetchall())


def _permission(values: tuple[Any, ...]) -> PermissionRecord:
    source_id, *dimensions, verification, conditions, audit = values
    return PermissionRecord(
        source_id=source_id,
        dimensions=dict(zip(PERMISSION_DIMENSIONS, dimensions, strict=True)),
        training_verification=verification,
        conditions=tuple(json.loads(conditions)),
        audit=json.loads(audit),
    )
