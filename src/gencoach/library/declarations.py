"""Declaration files given to a build (JSON or YAML): read, and the tools' failure
predicates (`--tool-failures FILE`) parsed from one.

The file's shape: docs/library.md ("Tools' own failure predicates").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gencoach.errors import ExportError
from gencoach.export.tool_failures import ToolFailures
from gencoach.library.errors import LibraryError


def read_declaration(path: Path, what: str) -> Any:
    """The data of a JSON or YAML file; `what` names the file's kind in the error."""
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise LibraryError(path, f"cannot be read as {what}: {error}") from None


def read_tool_failures(path: Path) -> ToolFailures:
    """The failure predicates a tool failures file declares, by tool."""
    declaration = read_declaration(path, "a tool failures file")
    try:
        return ToolFailures.parse(declaration, "a tool failures file")
    except ExportError as error:
        raise LibraryError(path, error.reason) from None
