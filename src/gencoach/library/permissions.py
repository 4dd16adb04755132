"""Permission audits given at build time (`--permissions FILE`), written into the index.

`read_permissions` reads the file, `apply_permissions` records each source's audit. The
file's shape: docs/library.md ("Values for gencoach's own saves").
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from gencoach.library.declarations import read_declaration
from gencoach.library.errors import LibraryError
from gencoach.library.records import PERMISSION_DIMENSIONS, AuditState, Permission

_KEYS = {*PERMISSION_DIMENSIONS, "training_verification", "conditions", "audit"}


def _audit(path: Path, key: str, entry: object) -> tuple[Any, ...]:
    """One source's audit as the index stores it; a dimension left out is `unknown`."""
    if not isinstance(entry, dict):
        raise LibraryError(path, f"sources.{key} must be a mapping")
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        raise LibraryError(
            path, f"sources.{key}: unknown field(s) {', '.join(unknown)}; known: "
            f"{', '.join(sorted(_KEYS))}"
        )  # fmt: skip
    values: list[str] = []
    for name in PERMISSION_DIMENSIONS:
        value = entry.get(name, Permission.UNKNOWN.value)
        if value not in set(Permission):
            choices = ", ".join(member.value for member in Permission)
            raise LibraryError(path, f"sources.{key}.{name} is {value!r}; one of: {choices}")
        values.append(str(value))
    verified = entry.get("training_verification", AuditState.UNKNOWN.value)
    if verified not in set(AuditState):
        choices = ", ".join(member.value for member in AuditState)
        raise LibraryError(
            path, f"sources.{key}.training_verification is {verified!r}; one of: {choices}"
        )
    conditions = entry.get("conditions", [])
    if not isinstance(conditions, list) or not all(isinstance(c, str) for c in conditions):
        raise LibraryError(path, f"sources.{key}.conditions must be a list of strings")
    audit = entry.get("audit", {})
    if not isinstance(audit, dict):
        raise LibraryError(path, f"sources.{key}.audit must be a mapping")
    for name in audit:
        if not isinstance(name, str):
            raise LibraryError(
                path,
                f"sources.{key}.audit has the key {name!r}, not a string: YAML reads an "
                'unquoted on, off, yes or no as a boolean; quote it ("on")',
            )
    return (*values, str(verified), json.dumps(conditions), json.dumps(audit, default=str))


def read_permissions(path: Path) -> dict[str, tuple[Any, ...]]:
    """The audits of a permissions file by key, each as the index stores it."""
    data = read_declaration(path, "a permissions file")
    sources = data.get("sources") if isinstance(data, dict) else None
    if not isinstance(sources, dict):
        raise LibraryError(path, "must hold a `sources` mapping of source ids to audits")
    return {str(key): _audit(path, str(key), entry) for key, entry in sources.items()}


def _match(source_id: str, audits: dict[str, tuple[Any, ...]]) -> tuple[Any, ...] | None:
    """The audit of a source id: its own key, else the longest key ending in `*` that it
    starts with."""
    if source_id in audits:
        return audits[source_id]
    prefixes = [key for key in audits if key.endswith("*") and source_id.startswith(key[:-1])]
    return audits[max(prefixes, key=len)] if prefixes else None


def apply_permissions(db: sqlite3.Connection, audits: dict[str, tuple[Any, ...]]) -> int:
    """Record the audit of every source of the index a key matches; how many matched.

    A source no key matches gets no record, so its audit reads `unknown` throughout:
    nothing is ever guessed.
    """
    matched = 0
    for (source_id,) in db.execute("SELECT DISTINCT source_id FROM sources").fetchall():
        audit = _match(source_id, audits)
        if audit is not None:
            db.execute("INSERT OR REPLACE INTO permissions VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                       (source_id, *audit))  # fmt: skip
            matched += 1
    return matched
