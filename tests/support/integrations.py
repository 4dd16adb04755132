"""Real processes for the Gymnasium integration: the reference agent on BabyAI, the env agent
on any adapter, a controller coached by an adapter's oracle teacher."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from tests.support.controller import ControllerProcess
from tests.support.processes import answers_200, free_port, kill_tree, wait_started
from tests.support.teacher import teacher_controller

ORACLE_SETTINGS: dict[str, Any] = {
    "coaching": {"enabled": True, "lease_s": 5},
    "backends": {
        "teacher": {"type": "python", "endpoint": "gencoach.integrations.minigrid:teacher"}
    },
    "workers": {"processes": 2, "job_timeout_s": 60},
}


def oracle_controller(
    folder: Path, redis_url: str, teacher: str = "gencoach.integrations.minigrid:teacher"
) -> AbstractContextManager[ControllerProcess]:
    """A controller with an oracle teacher (BabyAI's by default) as its one backend, and
    its workers."""
    settings = {**ORACLE_SETTINGS, "backends": {"teacher": {"type": "python", "endpoint": teacher}}}
    return teacher_controller(folder, redis_url, settings)


def babyai_agent(folder: Path, seed: int = 0, **rates: float) -> AbstractContextManager[str]:
    """`gencoach agent serve --world babyai` with these mistake rates; its URL."""
    return agent_process(folder, ["--world", "babyai"], seed, **rates)


def env_agent(
    folder: Path, adapter: str, seed: int = 0, **rates: float
) -> AbstractContextManager[str]:
    """`gencoach agent serve --env ADAPTER` (the oracle policy) with these mistake rates."""
    return agent_process(folder, ["--env", adapter], seed, **rates)


@contextmanager
def agent_process(folder: Path, choice: list[str], seed: int = 0, **rates: float) -> Iterator[str]:
    """`gencoach agent serve` with these options and mistake rates; its URL."""
    port = free_port()
    options = [f"--{name.replace('_', '-')}={rate}" for name, rate in rates.items()]
    command = [sys.executable, "-m", "gencoach", "agent", "serve", *choice]
    command += ["--port", str(port), "--seed", str(seed), *options]
    log_path = folder / "agent.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_started(lambda: answers_200(f"{url}/health"), process, log_path, "the BabyAI agent")
        yield url
    finally:
        kill_tree(process.pid)
        process.wait(10)
