"""Exports in tests: the type of the export suites' `export` fixture, reading the rows an
export wrote, and running `gencoach demo` for saves to export."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gencoach.export import ExportOutcome

Export = Callable[..., ExportOutcome]
"""The `export` fixture: run an export with a format and settings; its outcome."""


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a `.jsonl` file or a `.json` array."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        rows: list[dict[str, Any]] = json.loads(text)
        return rows
    return [json.loads(line) for line in text.splitlines()]


def run_demo(output: Path, *arguments: str) -> Path:
    """Run `gencoach demo` into `output` with `arguments`; the folder of its saves."""
    done = subprocess.run(
        [sys.executable, "-m", "gencoach", "demo", *arguments, "--output", str(output)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, f"gencoach demo failed:\n{done.stdout}\n{done.stderr}"
    (graphs,) = output.glob("*/graphs")
    return graphs
