"""Export formats are plugins: entry points of the group `gencoach.exporters`.

`installed_formats` lists them, `load_exporter` builds one from its options. See
docs/export.md ("Your own format").
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Final

from pydantic import JsonValue

from gencoach.errors import ExportError
from gencoach.export.formats.base import Exporter

GROUP: Final = "gencoach.exporters"


def installed_formats() -> dict[str, EntryPoint]:
    """The installed formats by name, without importing them."""
    found: dict[str, EntryPoint] = {}
    for entry in sorted(entry_points(group=GROUP), key=lambda item: (item.name, item.value)):
        if entry.name in found and found[entry.name].value != entry.value:
            raise ExportError(
                f"format {entry.name!r} is installed twice ({found[entry.name].value} and "
                f"{entry.value}); uninstall one of the packages"
            )
        found[entry.name] = entry
    return found


def load_exporter(name: str, options: Mapping[str, JsonValue]) -> Exporter:
    """Build the named format with its options, or say what is installed."""
    formats = installed_formats()
    entry = formats.get(name)
    if entry is None:
        installed = ", ".join(sorted(formats)) or "none"
        raise ExportError(f"unknown format {name!r}; installed formats: {installed}")
    try:
        factory = entry.load()
    except (ImportError, AttributeError) as error:
        raise ExportError(f"format {name!r} ({entry.value}) cannot be loaded: {error}") from None
    exporter = factory(dict(options))
    if not isinstance(exporter, Exporter):
        raise ExportError(
            f"format {name!r} ({entry.value}) built a {type(exporter).__name__}, not an Exporter"
        )
    return exporter
