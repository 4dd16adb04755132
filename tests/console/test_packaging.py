"""The console's page and scripts ship inside the wheel: it works from the package alone."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "src" / "gencoach" / "console" / "static"

pytestmark = pytest.mark.slow


def test_wheel_holds_every_static_file(tmp_path: Path) -> None:
    """A wheel built with hatchling holds the page, the stylesheet and every script."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "hatchling",
            "build",
            "--target",
            "wheel",
            "--directory",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    (wheel,) = tmp_path.glob("gencoach-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        "gencoach/console/static/" + str(path.relative_to(STATIC))
        for path in STATIC.rglob("*")
        if path.is_file()
    }
    assert {"gencoach/console/static/index.html", "gencoach/console/static/js/app.js"} <= expected
    assert expected <= names, sorted(expected - names)
