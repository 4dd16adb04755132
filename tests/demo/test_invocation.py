"""The demo's summary names gencoach the way it was started, so its command can be pasted."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from gencoach.demo.invocation import own_command


def _script(folder: Path) -> Path:
    script = folder / ".venv" / "bin" / "gencoach"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    return script


def test_a_venv_script_off_path_is_named_by_its_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Started as .venv/bin/gencoach (not on PATH), the summary says .venv/bin/gencoach."""
    script = _script(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert own_command(str(script)) == ".venv/bin/gencoach"


def test_the_script_on_path_is_named_gencoach(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When PATH finds this very script, the summary says plain gencoach."""
    script = _script(tmp_path)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}/usr/bin")
    assert own_command(str(script)) == "gencoach"


def test_python_dash_m_is_named_as_such() -> None:
    """Under `python -m gencoach` the summary says the interpreter and -m gencoach."""
    assert own_command("/x/gencoach/__main__.py") == f"{sys.executable} -m gencoach"
