"""Canonical record files as a source: what `gencoach library canonical` writes.

`CanonicalFileSource` reads one source's records, whole, one a line: a source adapter
run on its own writes them, they can be reviewed, and `build` or `append` takes the file.
See docs/library.md ("Sources").
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from gencoach.library.errors import SourceError
from gencoach.library.sources.base import FileSource, SourceContent
from gencoach.library.sources.canonical import finish

RECORD_KEYS: Final = frozenset(
    {"id", "task_key", "environment_key", "source_id", "source_revision", "events", "eligibility"}
)
"""Keys every canonical record has, and no conversation row does together."""
_DERIVED: Final = ("id", "eligibility")


def is_canonical(row: object) -> bool:
    """Whether a JSONL line's object is a canonical record (not a conversation row)."""
    return isinstance(row, dict) and set(row) >= RECORD_KEYS


class CanonicalFileSource(FileSource):
    """A `.jsonl` file of canonical records, one source's.

    Its records keep what they say of themselves (their `source_id`, `source_revision`
    and `locator`), so the file is a carrier, not a source of its own: its revision is
    its records' `source_revision`, and a base that already holds that source revision
    does not read it again. A record whose `id` does not match its content (edited since
    it was written) or that lacks a field stops the file, as a bad line of any source does.
    """

    kind = "canonical"

    def digest(self) -> str:
        """The records' own `source_revision` (the file carries that source revision)."""
        for _, record in self._records():
            return str(record["source_revision"])
        raise SourceError(self.location, "holds no canonical record")

    def open(self) -> SourceContent:
        """The records, checked; a bad line raises `SourceError` naming it."""
        first = next(self._records(), None)
        if first is None:
            raise SourceError(self.location, "holds no canonical record")
        return SourceContent(str(first[1]["source_id"]), self._payloads(first[1]))

    def _records(self) -> Iterator[tuple[int, dict[str, Any]]]:
        for number, record in self.json_lines():
            if not is_canonical(record):
                missing = ", ".join(sorted(RECORD_KEYS - set(record)))
                reason = f"line {number}: is not a canonical record (missing {missing})"
                if not isinstance(record, dict):
                    reason = f"line {number}: is not a JSON object"
                raise SourceError(self.location, reason)
            yield number, record

    def _payloads(self, first: dict[str, Any]) -> Iterator[dict[str, Any]]:
        source = (first["source_id"], first["source_revision"])
        for number, record in self._records():
            found = (record["source_id"], record["source_revision"])
            if found != source:
                raise SourceError(
                    self.location,
                    f"line {number}: holds source {found[0]} ({found[1][:12]}), the file "
                    f"{source[0]} ({source[1][:12]}); write one canonical file per source",
                )
            try:
                payload = finish({k: v for k, v in record.items() if k not in _DERIVED})
            except (KeyError, TypeError, ValueError) as error:
                raise SourceError(self.location, f"line {number}: bad record: {error}") from None
            if payload["id"] != record["id"]:
                raise SourceError(
                    self.location,
                    f"line {number}: record {record['id']} does not match its content "
                    f"(it hashes to {payload['id']}): edited since it was written",
                )
            yield payload
