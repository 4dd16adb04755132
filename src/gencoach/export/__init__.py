"""Saved graphs → training datasets: selection, task splits, formats as plugins, manifests."""

from gencoach.errors import ExportError
from gencoach.export.command import export_command
from gencoach.export.discovery import GROUP, installed_formats, load_exporter
from gencoach.export.formats.base import Exporter, Row, RowFailure, lineage
from gencoach.export.inputs import Shuffle
from gencoach.export.runner import ExportOutcome, ExportSettings, run_export
from gencoach.export.selection import Example, SelectionPolicy, candidate_score, select

__all__ = [
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
