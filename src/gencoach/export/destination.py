"""Where an export goes: a folder of its own per format, never over another's manifest.

`default_destination` names the folder; `claim` refuses one that holds another
producer's or another format's export. See docs/export.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

from gencoach.errors import ExportError
from gencoach.export.manifest import MANIFEST_FILE

DATASETS_DIR: Final = "datasets"


def default_destination(source: Path, label: str) -> Path:
    """`SOURCE/datasets/<label>`.

    The label is the format's name, or `agent-<NAME>` for a MAGMA exporter, so formats
    never share a folder and MAGMA-GEN's own export (written straight into
    `SOURCE/datasets/`) is left alone.
    """
    return source / DATASETS_DIR / label


def _owner(manifest: object) -> tuple[str, str] | None:
    """(package and version, format) of a manifest, or None when it names no producer."""
    if not isinstance(manifest, dict):
        return None
    producer = manifest.get("producer")
    if not isinstance(producer, dict) or not isinstance(producer.get("package"), str):
        return None
    settings = manifest.get("settings")
    label = settings.get("format") if isinstance(settings, dict) else None
    package = f"{producer['package']} {producer.get('version', '')}".strip()
    return package, label if isinstance(label, str) else ""


def claim(folder: Path, label: str) -> None:
    """Refuse a folder whose manifest belongs to another producer or another format.

    A folder that already holds an export manifest is written to only when that manifest
    is gencoach's own, for the same format.
    """
    path = folder / MANIFEST_FILE
    if not path.exists() and not path.is_symlink():
        return
    refusal = f"refusing to export {label!r} into {folder}"
    try:
        owner = _owner(json.loads(path.read_bytes()))
    except (OSError, ValueError):
        owner = None
    if owner is None:
        raise ExportError(f"{refusal}: its {MANIFEST_FILE} is not a readable export manifest")
    package, owner_label = owner
    if not package.startswith("gencoach "):
        raise ExportError(
            f"{refusal}: it holds an export by {package}, which gencoach never overwrites; "
            "choose another --out"
        )
    if owner_label != label:
        raise ExportError(
            f"{refusal}: it holds gencoach's {owner_label!r} export; each format needs a "
            "folder of its own, choose another --out"
        )
