"""Which runs an export reads: only some cases, only runs since a time, at most n per agent.

`RunFilter` holds the options `cases`, `since` and `limit` (the flags `--case`, `--since`
and `--limit` replace them). See docs/export.md ("Which runs").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from pydantic import JsonValue

from gencoach.errors import ExportError
from gencoach.export.sources import Save

FILTER_KEYS: Final = ("cases", "since", "limit")


def parse_time(text: str, where: str = "option 'since'") -> datetime:
    """An ISO 8601 time, UTC when it names no offset."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ExportError(
            f"{where} must be an ISO 8601 time such as 2026-12-01T19:00:00Z, got {text!r}"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def newest_last(save: Save) -> tuple[float, str]:
    """The order of saves by age: by start (unknown first), then by name."""
    return (float("-inf") if save.started is None else save.started, save.name)


@dataclass(frozen=True)
class RunFilter:
    """The three filters; None leaves a filter off."""

    cases: frozenset[str] | None = None
    since: str | None = None
    limit: int | None = None

    @classmethod
    def parse(cls, values: dict[str, JsonValue]) -> RunFilter:
        """The filters among options (keys `cases`, `since`, `limit`)."""
        cases, since, limit = (values.get(key) for key in FILTER_KEYS)
        if cases is not None and (
            not isinstance(cases, list)
            or not cases
            or not all(isinstance(case, str) and case for case in cases)
        ):
            raise ExportError(f"option 'cases' must be a list of case names, got {cases!r}")
        if since is not None:
            if not isinstance(since, str):
                raise ExportError(f"option 'since' must be an ISO 8601 time, got {since!r}")
            parse_time(since)
        if limit is not None and (
            not isinstance(limit, int) or isinstance(limit, bool) or limit < 1
        ):
            raise ExportError(f"option 'limit' must be an integer of at least 1, got {limit!r}")
        return cls(
            cases=None if cases is None else frozenset(c for c in cases if isinstance(c, str)),
            since=since,
            limit=limit,
        )

    def to_json(self) -> dict[str, JsonValue]:
        """The filters in effect, as the manifest records them."""
        cases: list[JsonValue] | None = None if self.cases is None else [*sorted(self.cases)]
        return {
            "cases": cases,
            "since": self.since,
            "limit": self.limit,
        }

    @property
    def active(self) -> bool:
        """Whether any filter is set."""
        return self.cases is not None or self.since is not None or self.limit is not None

    def apply(self, saves: Sequence[Save]) -> list[Save]:
        """The saves that pass, in their given order."""
        kept = list(saves)
        if self.limit is not None:
            by_agent: dict[str, list[Save]] = {}
            for save in kept:
                by_agent.setdefault(save.agent_id, []).append(save)
            newest = {
                save.name
                for group in by_agent.values()
                for save in sorted(group, key=newest_last)[-self.limit :]
            }
            kept = [save for save in kept if save.name in newest]
        if self.since is not None:
            since = parse_time(self.since).timestamp()
            kept = [s for s in kept if s.started is not None and s.started >= since]
        if self.cases is not None:
            cases = self.cases
            kept = [s for s in kept if s.task.scenario in cases or s.task.target in cases]
        return kept
