"""Every format implements the options it accepts and refuses the others: each installed
format accepts exactly the options docs/export.md lists for it, and `exclude_fallbacks`
leaves fallback-made corrections out of every format that takes it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import JsonValue

from gencoach.errors import ExportError
from gencoach.export.discovery import installed_formats, load_exporter
from gencoach.export.formats.base import Exporter
from gencoach.export.magma import MagmaExporter
from gencoach.protocol import SituationRecord
from tests.support.exports import Export, read_rows
from tests.support.saved_runs import coached_run, write_run

EXPORT_DOC = Path(__file__).resolve().parents[2] / "docs" / "export.md"
FORMATS = sorted(installed_formats())


def _documented(heading: str) -> set[str]:
    """The option names in the first column of the table under `heading` in export.md."""
    text = EXPORT_DOC.read_text(encoding="utf-8")
    start = text.index(f"\n{heading}\n")
    section = text[start + len(heading) + 2 :].split("\n## ", 1)[0]
    return {found for found in re.findall(r"^\| `(\w+)` \|", section, re.MULTILINE)}


def _accepted(fmt: str) -> set[str]:
    """The options the format reads, as its refusal of an unknown option lists them."""
    with pytest.raises(ExportError) as caught:
        load_exporter(fmt, {"no_such_option": True})
    known = caught.value.reason.split("known options: ", 1)[1]
    return set(known.split(", "))


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_format_accepts_exactly_the_options_its_table_lists(fmt: str) -> None:
    """The options a format reads are those docs/export.md documents for it, no more: any
    other is refused as unknown."""
    assert _accepted(fmt) == _documented(f"## `{fmt}` options")


class _Bare(Exporter):
    """A plugin format that implements no option."""

    name = "bare"
    files: ClassVar[Mapping[str, str]] = {"rows": "rows.jsonl"}

    def __init__(self, options: Mapping[str, JsonValue]) -> None:
        super().__init__(options)
        self._reader.finish()

    def rows(self, *_: Any) -> Any:
        return iter(())


def test_a_format_that_does_not_implement_exclude_fallbacks_refuses_it() -> None:
    """The base exporter reads no option on a format's behalf: a plugin that does not read
    `exclude_fallbacks` refuses it instead of exporting fallbacks it was told to leave out."""
    with pytest.raises(ExportError) as caught:
        _Bare({"exclude_fallbacks": True})
    assert caught.value.reason == (
        "unknown option 'exclude_fallbacks' for format 'bare'; known options: none"
    )


def test_a_magma_exporter_s_exclude_fallbacks_is_checked_by_gencoach() -> None:
    """`--agent` takes `exclude_fallbacks` as gencoach's own option, checked before the MAGMA
    exporter is even loaded."""
    with pytest.raises(ExportError) as caught:
        MagmaExporter("nobody", {"exclude_fallbacks": "yes"})
    assert caught.value.reason == (
        "option 'exclude_fallbacks' of format 'agent-nobody' must be true or false, got \"yes\""
    )
    assert _documented("## `--agent` options") == {"exclude_fallbacks"}


def _answers(fmt: str, row: dict[str, Any]) -> list[tuple[int, str | None]]:
    """The answers a row trains on or against: (candidate id, decision source)."""
    if fmt == "chat":
        return [(row["candidate_id"], row["decision_source"])]
    if fmt == "full-history":
        return [(row["metadata"]["candidate_id"], row["metadata"]["decision_source"])]
    if fmt == "preference":
        sides = (row["metadata"][side] for side in ("chosen", "rejected"))
        return [(side["candidate_id"], side["decision_source"]) for side in sides]
    raise AssertionError(f"a new format {fmt!r}: say where its rows name their answers")


def _rows(source: Path, fmt: str) -> list[dict[str, Any]]:
    exporter = load_exporter(fmt, {})
    (name,) = exporter.channels.values()
    return read_rows(source / "datasets" / fmt / name)


def _fallback_made_c7() -> list[SituationRecord]:
    situations = coached_run(plain=True)
    (c7,) = (c for s in situations for c in s.candidates if c.id == 7)
    c7.coaching_source = {"request_id": "r1", "decision_source": "fallback"}
    return situations


@pytest.mark.parametrize("fmt", [fmt for fmt in FORMATS if "exclude_fallbacks" in _accepted(fmt)])
def test_exclude_fallbacks_leaves_the_fallback_made_correction_out(
    export: Export, source: Path, fmt: str
) -> None:
    """c7, the coached answer, is a fallback's: without the option a row names it with
    `decision_source: "fallback"`; with it, no row holds c7, and a format that selects
    examples keeps every other one (c7 is a leaf)."""
    write_run(source / "run", _fallback_made_c7())
    # c7 repeats c2's answer in the same context: kept apart, it has a row of its own.
    given: dict[str, Any] = {"dedupe": False} if "dedupe" in _accepted(fmt) else {}
    export(fmt, options=given)
    answers = {a for row in _rows(source, fmt) for a in _answers(fmt, row)}
    assert (7, "fallback") in answers
    export(fmt, options={**given, "exclude_fallbacks": True})
    kept = {a for row in _rows(source, fmt) for a in _answers(fmt, row)}
    rest = {a for a in answers if a[0] != 7}
    assert kept <= rest
    if load_exporter(fmt, {}).selection is not None:
        assert kept == rest
