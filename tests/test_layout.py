"""Layout rules: in the package, RQ behind one adapter, module names unique, the stage
folders importing one way; in the tests, no test module importing another or a conftest."""

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
    """Only `rq_adapter.py` imports RQ: every other module goes through it."""
    importers = sorted(
        str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py") if "rq" in _imported(path)
    )
    assert importers == ["rq_adapter.py"], f"modules importing rq: {importers}"


def test_the_rq_version_tested_is_the_one_pinned() -> None:
    """pyproject.toml allows one minor series of RQ, and the constraints pin the RQ the tests
    run with."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pinned = [d for d in project["project"]["dependencies"] if d.startswith("rq")]
    constraints = (ROOT / "docker" / "constraints.txt").read_text().split()
    assert pinned == ["rq>=3.0,<3.1"]
    assert f"rq=={rq.__version__}" in constraints


# The coaching pipeline: the controller's stages, the workers and the wire contracts.
PIPELINE = ("service", "workers", "protocol")


def _modules(*packages: str) -> list[Path]:
    roots = [PACKAGE / package for package in packages] if packages else [PACKAGE]
    return [
        path
        for root in roots
        for path in root.rglob("*.py")
        if path.stem not in {"__init__", "__main__"}
    ]


def test_the_pipelines_module_names_are_unique() -> None:
    """No two modules of the pipeline share a name."""
    names = Counter(path.stem for path in _modules(*PIPELINE))
    assert [name for name, count in names.items() if count > 1] == []


# The controller's stage folders, each importing only those before it (a request's life
# from the graph it starts in to its recovery); saving and the web API stand above them.
STAGES = ("store", "coaching", "dispatching", "branching", "recovery")


def _stages_imported(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[:2] == ["gencoach", "service"] and len(parts) > 2:
                found.add(parts[2])
    return found


def test_the_stage_folders_import_one_way() -> None:
    """No stage folder of the controller imports a later stage, nor saving or the API."""
    backwards = []
    for position, stage in enumerate(STAGES):
        later = {*STAGES[position + 1 :], "saving", "web"}
        for path in (PACKAGE / "service" / stage).rglob("*.py"):
            wrong = sorted(_stages_imported(path) & later)
            if wrong:
                backwards.append(f"{path.relative_to(PACKAGE)} imports {wrong}")
    assert backwards == []


TESTS = ROOT / "tests"


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _a_test_or_conftest(name: str) -> bool:
    last = name.rsplit(".", 1)[-1]
    return last.startswith("test_") or (name.startswith("tests.") and last == "conftest")


def test_no_test_module_imports_another() -> None:
    """Tests share helpers through tests/support (or their folder's helper modules), never
    by importing another test module or a suite's conftest."""
    importers = sorted(
        f"{path.relative_to(ROOT)} imports {name}"
        for path in TESTS.rglob("*.py")
        for name in _imported_modules(path)
        if _a_test_or_conftest(name)
    )
    assert importers == []


def test_every_module_says_what_it_holds_in_a_few_lines() -> None:
    """Each module opens with a docstring of at most six lines; how its parts behave is
    told in their own docstrings, the manual in docs/."""
    long: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        docstring = ast.get_docstring(ast.parse(path.read_text(), str(path)))
        lines = len(docstring.splitlines()) if docstring else 0
        if not 1 <= lines <= 6:
            long[str(path.relative_to(PACKAGE))] = lines
    assert long == {}
