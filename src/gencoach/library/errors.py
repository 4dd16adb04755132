"""What goes wrong with a trajectory library, by what the caller can do about it.

LibraryError: a library cannot be built, appended to or read (`path` says which)
├── SourceError: one source cannot be read; it is reported and skipped
├── QueryError: a query, view or sampling setting is not valid (`field` names it)
└── MissingTrajectoryContentError: selected payloads are not readable (`source_ids`)
"""

from __future__ import annotations

from gencoach.errors import GencoachError


class LibraryError(GencoachError):
    """A library cannot be built, appended to or read; `path` is where, `reason` why."""

    def __init__(self, path: object, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class SourceError(LibraryError):
    """A source (a save folder, a chat file) cannot be read; the build skips it."""


class QueryError(LibraryError, ValueError):
    """A query, view or sampling value is not valid; `field` names the setting."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        super().__init__(field, reason)


class MissingTrajectoryContentError(LibraryError):
    """Selected records whose payload is not readable: their sources are indexed
    metadata-only and no overlay supplies them. `source_ids` lists those sources."""

    def __init__(self, source_ids: list[str]) -> None:
        self.source_ids = sorted(set(source_ids))
        super().__init__(
            "content",
            "the payload of selected trajectories is not available (metadata-only sources: "
            f"{', '.join(self.source_ids)}); give an overlay with their canonical records",
        )
