"""The package's layout rules: RQ behind one adapter, module names unique."""

from __future__ import annotations

import ast
import tomllib
from collections import Counter
from pathlib import Path

import rq

import gencoach

PACKAGE = Path(gencoach.__file__).parent
ROOT = PACKAGE.parent.parent


def _imported(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_rq_is_imported_by_the_adapter_only() -> None:
    importers = sorted(
        str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py") if "rq" in _imported(path)
    )
    assert importers == ["rq_adapter.py"], f"modules importing rq: {importers}"


def test_the_rq_version_tested_is_the_one_pinned() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pinned = [d for d in project["project"]["dependencies"] if d.startswith("rq")]
    constraints = (ROOT / "docker" / "constraints.txt").read_text().split()
    assert pinned == ["rq>=3.0,<3.1"]
    assert f"rq=={rq.__version__}" in constraints


def test_module_names_are_unique_across_the_package() -> None:
    names = Counter(
        path.stem for path in PACKAGE.rglob("*.py") if path.stem not in {"__init__", "__main__"}
    )
    repeated = {name: count for name, count in names.items() if count > 1}
    assert not repeated, f"module names used more than once: {repeated}"
