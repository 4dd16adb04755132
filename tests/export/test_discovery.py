"""Formats as plugins: the built-ins are entry points, and a third-party factory plugs in."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import ClassVar

import pytest
from pydantic import JsonValue

import gencoach.export
import gencoach.export.discovery as discovery
from gencoach.export import (
    GROUP,
    Example,
    Exporter,
    ExportError,
    Row,
    RowFailure,
    Shuffle,
    installed_formats,
    lineage,
    load_exporter,
)
from gencoach.graph import SavedGraph
from tests.support.exports import Export, read_rows
from tests.support.saved_runs import write_run


class EchoExporter(Exporter):
    """A third-party format: one row per selected example, with a prefix from its options."""

    name = "echo"
    files: ClassVar[Mapping[str, str]] = {"echo": "echo.jsonl"}

    def __init__(self, options: Mapping[str, JsonValue]) -> None:
        super().__init__(options)
        self.prefix = self._reader.text("prefix", "")
        self._reader.finish()

    def rows(
        self, graph: SavedGraph, examples: Sequence[Example], shuffle: Shuffle
    ) -> Iterator[Row | RowFailure]:
        for example in examples:
            candidate = graph.candidates[example.candidate_id]
            tools = [tool.get("name") for tool in graph.input_of(candidate.id).tools]
            shuffle.rng(graph.config.run_id, example.situation_id, candidate.id).shuffle(tools)
            data = {"id": f"{self.prefix}{candidate.id}", **lineage(graph.config, 0, candidate)}
            yield Row("echo", {**data, "tools": tools})


def make_echo(options: Mapping[str, JsonValue]) -> Exporter:
    """The factory a third-party package names in its entry point."""
    return EchoExporter(options)


def not_an_exporter(options: Mapping[str, JsonValue]) -> object:
    """A broken factory."""
    return {"options": options}


def _install(monkeypatch: pytest.MonkeyPatch, *extra: tuple[str, str]) -> None:
    builtin = list(entry_points(group=GROUP))
    added = [EntryPoint(name, value, GROUP) for name, value in extra]

    def fake(group: str) -> list[EntryPoint]:
        assert group == GROUP
        return builtin + added

    monkeypatch.setattr(discovery, "entry_points", fake)


def test_the_builtin_formats_are_installed_entry_points() -> None:
    """The package's metadata registers the three built-in formats."""
    formats = installed_formats()
    assert {name: formats[name].value for name in ("chat", "full-history", "preference")} == {
        "chat": "gencoach.export.formats.chat:ChatExporter",
        "full-history": "gencoach.export.formats.full_history:FullHistoryExporter",
        "preference": "gencoach.export.formats.preference:PreferenceExporter",
    }


def test_a_third_party_factory_exports_through_the_same_pipeline(
    monkeypatch: pytest.MonkeyPatch, export: Export, source: Path
) -> None:
    """An entry point naming a factory is a format: its rows, files and manifest are written."""
    _install(monkeypatch, ("echo", "tests.export.test_discovery:make_echo"))
    write_run(source / "run")
    outcome = export("echo", options={"prefix": "c"})
    assert outcome.rows == {"echo": 5}
    rows = read_rows(source / "datasets" / "echo" / "echo.jsonl")
    assert [row["id"] for row in rows] == ["c0", "c2", "c5", "c6", "c7"]
    assert (source / "datasets" / "echo" / "echo_train.jsonl").is_file()


def test_a_factory_that_builds_no_exporter_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command says which format and entry point broke the contract."""
    _install(monkeypatch, ("broken", "tests.export.test_discovery:not_an_exporter"))
    with pytest.raises(ExportError) as caught:
        load_exporter("broken", {})
    assert caught.value.reason == (
        "format 'broken' (tests.export.test_discovery:not_an_exporter) built a dict, "
        "not an Exporter"
    )


def test_a_format_that_cannot_be_imported_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A missing module (an uninstalled extra) is an error naming the format."""
    _install(monkeypatch, ("ghost", "no_such_module_here:Factory"))
    with pytest.raises(
        ExportError, match=r"^format 'ghost' \(no_such_module_here:Factory\) cannot"
    ):
        load_exporter("ghost", {})


def test_two_packages_claiming_one_name_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A name installed twice with different factories is ambiguous: both are named."""
    _install(monkeypatch, ("chat", "tests.export.test_discovery:make_echo"))
    with pytest.raises(ExportError, match="format 'chat' is installed twice"):
        installed_formats()


def test_the_public_surface() -> None:
    """What users import from `gencoach.export`, and nothing else, is public."""
    assert gencoach.export.__all__ == [
        "GROUP",
        "Example",
        "ExportError",
        "ExportOutcome",
        "ExportSettings",
        "Exporter",
        "Row",
        "RowFailure",
        "SelectionPolicy",
        "Shuffle",
        "candidate_score",
        "export_command",
        "installed_formats",
        "lineage",
        "load_exporter",
        "run_export",
        "select",
    ]
    assert all(hasattr(gencoach.export, name) for name in gencoach.export.__all__)
