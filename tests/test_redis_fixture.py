"""The suite's Redis: an embedded server unless GC_TEST_REDIS names one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
def test_probe(redis_url):
    print("REDIS_URL=" + redis_url)
"""


def _run_probe(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    probe = tmp_path / "test_probe.py"
    probe.write_text(PROBE)
    environ = {key: value for key, value in os.environ.items() if key != "GC_TEST_REDIS"}
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-q", "-s", "--rootdir",
         str(ROOT), "-c", str(ROOT / "pyproject.toml"), str(probe)],
        cwd=ROOT, env=environ, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.slow
def test_unset_starts_an_embedded_server_not_the_machines(tmp_path: Path) -> None:
    result = _run_probe(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    url = next(line for line in result.stdout.splitlines() if "REDIS_URL=" in line)
    assert ":6379" not in url


@pytest.mark.slow
def test_an_unknown_mode_is_refused_with_what_to_use(tmp_path: Path) -> None:
    result = _run_probe(tmp_path, GC_TEST_REDIS="auto")
    assert result.returncode != 0
    assert "GC_TEST_REDIS is 'auto': use `embedded` (the default) or a redis:// URL" in (
        result.stdout + result.stderr
    )
