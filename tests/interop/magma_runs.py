"""Runs of the MAGMA agent (`magma_agent.py`) under gencoach, shared by the interop tests:
the agent started with its input log, and the reference simulator run until a correction
is proven."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from conftest import HERE, Processes, Stack, answers, free_port, wait_until


def start_agent(
    magma_python: Path, processes: Processes, tmp_path: Path, *flags: str
) -> tuple[str, Path]:
    """Start the MAGMA agent; its URL and the log of the inputs it receives."""
    port, log = free_port(), tmp_path / "agent-inputs.jsonl"
    script = str(HERE / "magma_agent.py")
    args = [str(magma_python), script, "--port", str(port), "--log", str(log), *flags]
    processes.start("agent", args)
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: processes.check_alive() or answers(f"{url}/health"), 30, "the agent")
    return url, log


def simulate_until_proven(
    gencoach: Path, agent_url: str, redis_url: str, stack: Stack, run_id: str, folder: Path
) -> list[dict[str, Any]]:
    """Run the reference simulator on buttons against the agent; the proven requests."""
    sim = subprocess.run(
        [str(gencoach), "sim", "run", "--agent-url", agent_url, "--scenario", "buttons",
         "--redis-url", redis_url, "--key-prefix", stack.key_prefix, "--run-id", run_id,
         "--seed", "3", "--branches", "1", "--max-wall-s", "30", "--branch-grace-s", "30"],
        capture_output=True, text=True, timeout=150, check=False, cwd=folder,
    )  # fmt: skip
    assert sim.returncode == 0, sim.stdout + sim.stderr
    proven: list[dict[str, Any]] = wait_until(
        lambda: [r for r in stack.requests_of(run_id) if r["state"] == "proven"],
        60,
        f"a proven failure request (requests: {stack.requests_of(run_id)})",
    )
    return proven


def agent_inputs(log: Path) -> list[dict[str, Any]]:
    """Every input the agent logged, in order (none before its first)."""
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
