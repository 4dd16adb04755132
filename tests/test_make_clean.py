"""`make clean` leaves a clone as fresh as it came."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


MAKE = shutil.which("make")


@pytest.mark.skipif(MAKE is None, reason="make is not installed")
def test_clean_removes_every_generated_folder(tmp_path: Path) -> None:
    """Venvs (.venv, .venv-*), caches, .hypothesis/ and output/ go; sources stay."""
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    made = [".venv", ".venv-trainers", ".venv-llm", ".pytest_cache", ".mypy_cache",
            ".ruff_cache", ".hypothesis", "output"]  # fmt: skip
    for name in made:
        (tmp_path / name).mkdir()
        (tmp_path / name / "file").write_text("x")
    (tmp_path / "src").mkdir()
    result = subprocess.run(
        [str(MAKE), "clean"], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["Makefile", "src"]
