"""The suite's start-up wait for the processes tests start: it fails quoting their output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import kill_tree, wait_started


def _start(code: str, output: Path) -> subprocess.Popen[bytes]:
    with output.open("wb") as sink:
        return subprocess.Popen([sys.executable, "-c", code], stdout=sink, stderr=subprocess.STDOUT)


def test_a_process_that_exits_at_start_up_is_quoted(tmp_path: Path) -> None:
    """A process that dies before it is ready fails the wait with its exit code and output."""
    output = tmp_path / "out.log"
    process = _start("import sys; print('config refused: port 1'); sys.exit(3)", output)
    with pytest.raises(RuntimeError) as raised:
        wait_started(lambda: False, process, output, "the server")
    assert str(raised.value) == (
        "the server exited (3) before it was ready; the end of its output:\n"
        "config refused: port 1\n"
    )


def test_a_process_never_ready_is_quoted_when_the_wait_ends(tmp_path: Path) -> None:
    """A process that runs but never gets ready fails the wait, after its bound, quoting
    what it printed so far."""
    output = tmp_path / "out.log"
    code = "import time; print('still loading', flush=True); time.sleep(60)"
    process = _start(code, output)
    try:
        wait_started(lambda: "loading" in output.read_text(), process, output, "the server")
        with pytest.raises(RuntimeError) as raised:
            wait_started(lambda: None, process, output, "the server", timeout_s=0.5)
    finally:
        kill_tree(process.pid)
        process.wait(10)
    assert str(raised.value).startswith("the server was not ready in 0.5 s; the end of its output")
    assert "still loading" in str(raised.value)


def test_the_ready_value_is_returned(tmp_path: Path) -> None:
    """Once ready, the wait returns what the readiness check found."""
    output = tmp_path / "out.log"
    process = _start("import time; time.sleep(60)", output)
    try:
        assert wait_started(lambda: ["w1"], process, output, "the server") == ["w1"]
    finally:
        kill_tree(process.pid)
        process.wait(10)
