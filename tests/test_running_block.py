"""The shell block of docs/running.md's "The whole loop, process by process", run as
written with real processes on loopback: it reaches proven corrections, an export and a
library query; and on the controller it leaves running, the funnel adds up and is the
same in `gencoach status`, the console and `/metrics`."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.funnel import assert_funnel_adds_up, console_funnel, metrics_funnel
from tests.support.metrics import Samples, scrape
from tests.support.processes import free_port, kill_tree, session_members

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
API_PORT, AGENT_PORT = 8750, 8751
STOP_LINE = "kill %1 %2 %3"
BASH = shutil.which("bash") or "/bin/bash"


def operator_block() -> str:
    """The first shell block of docs/running.md's "The whole loop, process by process"."""
    page = (ROOT / "docs" / "running.md").read_text(encoding="utf-8")
    section = page.split("\n## The whole loop, process by process\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"^```sh\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    assert found, "no ```sh block in docs/running.md's The whole loop, process by process"
    return found.group(1)


def _port_free(port: int) -> bool:
    try:
        with httpx.Client(timeout=0.5) as client:
            client.get(f"http://127.0.0.1:{port}/")
    except httpx.ConnectError:
        return True
    except httpx.HTTPError:
        return False
    return False


def _settled(url: str, timeout_s: float = 90) -> Samples:
    """The scrape once both runs are saved and no request is open."""
    deadline = time.monotonic() + timeout_s
    while True:
        samples = scrape(url)
        funnel = metrics_funnel(samples)
        saved = samples.value("gencoach_runs", state="saved")
        if saved == 2 and all(row["open"] == 0 for row in funnel.values()):
            return samples
        assert time.monotonic() < deadline, f"not settled: {saved} saved, {funnel}"
        time.sleep(1)


def _stop(session: int) -> None:
    for pid in session_members(session):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
    deadline = time.monotonic() + 20
    while session_members(session) and time.monotonic() < deadline:
        time.sleep(0.2)
    kill_tree(session)


def test_the_operator_section_runs_as_written_to_proven_corrections(tmp_path: Path) -> None:
    """Run the block (up to its last line, which stops the background jobs: the test stops
    them itself after reading the controller). When another process holds the page's
    ports, the controller's is moved by GENCOACH_API__PORT and the agent's in the text."""
    *lines, last = operator_block().rstrip().splitlines()
    assert last.startswith(STOP_LINE), last
    script = "\n".join(lines) + "\n"
    environ = {"PATH": f"{VENV_BIN}:/usr/bin:/bin", "HOME": str(tmp_path)}
    api_port = API_PORT
    if not _port_free(API_PORT):
        api_port = free_port()
        environ["GENCOACH_API__PORT"] = str(api_port)
    if not _port_free(AGENT_PORT):
        script = script.replace(str(AGENT_PORT), str(free_port()))
    shell = subprocess.Popen(
        [BASH, "-euo", "pipefail", "-c", script],
        cwd=tmp_path, env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )  # fmt: skip
    try:
        output, _ = shell.communicate(timeout=300)
        logs = {name: (tmp_path / name).read_text() for name in ("serve.log", "worker.log")}
        assert shell.returncode == 0, f"{output}\n{logs}"

        # It coached: branch orders executed, corrections proven, a dataset, a library.
        assert re.search(r"branch orders: [1-9]\d* executed", output), output
        proven = re.search(r"^proven\s+([\d\s,]+)$", output, re.MULTILINE)
        assert proven, output
        assert sum(int(v.replace(",", "")) for v in proven.group(1).split()) > 0, output
        assert re.search(r"exported [1-9]\d* rows", output), output
        assert (tmp_path / "output" / "datasets" / "chat" / "chat.jsonl").exists()
        query = re.search(r"^(\d+) trajectories in \d+ tasks$", output, re.MULTILINE)
        assert query, output
        assert int(query.group(1)) > 0, output
        assert "coached_correction" in output

        # The funnel adds up, and status, console and /metrics give the same numbers.
        url = f"http://127.0.0.1:{api_port}"
        samples = _settled(url)
        funnel = assert_funnel_adds_up(url, samples)
        for row, counts in funnel.items():  # settled: every executed branch has its outcome
            assert counts["executed"] == counts["proven"] + counts["unproven"], (row, counts)
        # The agent's mistake rates give these routes (the others, exceeded, text_rewrite
        # and people's, are run to their outcomes in tests/service/test_routes_more.py);
        # how many of each the stage limits admit depends on timing.
        seen = {row for row, counts in funnel.items() if counts["seen"]}
        assert seen == {"format", "failure", "no_action", "suboptimal"}, funnel
        assert sum(counts["proven"] for counts in funnel.values()) > 0
        _, console = console_funnel(url)

        # Job calls come from the job results: the agents' repairs and the LLM jobs.
        jobs = samples.by("gencoach_jobs_total", "kind")
        assert console["agent"]["calls"] == jobs.get("repair", 0) > 0
        llm = console["backends"][0]["jobs"]
        assert llm["calls"] == jobs.get("diagnosis", 0) + jobs.get("rewrite", 0)
        assert console["agent"]["latency_p50_s"] is not None
    finally:
        if shell.poll() is None:
            shell.kill()
        _stop(shell.pid)
    assert session_members(shell.pid) == []
