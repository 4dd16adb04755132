"""A MAGMA agent (magma-core models + `mount_coaching_routes`) coached by gencoach."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from magma_runs import agent_inputs, simulate_until_proven, start_agent

from conftest import Processes, Stack, wait_until

RUN = "interop-magma-agent"


def _settings(llm_stub: str) -> dict[str, Any]:
    """Failure coaching only: the privileged teacher diagnoses, the agent repairs."""
    return {
        "coaching": {
            "enabled": True,
            "lease_s": 10,
            "routes": {
                "format": False,
                "no_action": False,
                "exceeded": False,
                "suboptimal": False,
                "text_rewrite": False,
            },
        },
        "backends": {
            # The first backend diagnoses; the agent's session gets the HTTP one.
            "teacher": {"type": "python", "endpoint": "gencoach.sim.teacher:diagnose"},
            "agent-llm": {"type": "openai", "endpoint": llm_stub, "default_model": "stub"},
        },
        "workers": {"processes": 2, "job_timeout_s": 60},
    }


def test_a_magma_agent_applies_the_correction_it_proposed_and_its_branch_is_proven(
    gencoach_stack: Callable[[dict[str, Any]], Stack],
    gencoach_bin: Path,
    magma_python: Path,
    processes: Processes,
    redis_url: str,
    llm_stub: str,
    tmp_path: Path,
) -> None:
    """The agent's MAGMA-style proposal comes back as `extra_keys.coaching`, verbatim; the
    agent answers with it, and the coached branch reaches stage success (proven)."""
    stack = gencoach_stack(_settings(llm_stub))
    agent_url, log = start_agent(magma_python, processes, tmp_path)

    proven = simulate_until_proven(gencoach_bin, agent_url, redis_url, stack, RUN, tmp_path)
    assert proven[0]["route"] == "failure"

    coached = [item for item in agent_inputs(log) if "coaching" in item["extra_keys"]]
    assert coached, "the agent never received a reinjected correction"
    payload = coached[0]["extra_keys"]["coaching"]
    assert payload["kind"] == "replace_decision"  # the agent's own proposal, unwrapped
    plan = coached[0]["memory"]["plan"]
    press = payload["decision"]["tool_calls"][0]
    assert press["arguments"] == {"id": plan[2]}  # the correction, not the agent's mistake

    folder = wait_until(lambda: stack.save_of(RUN), 60, "the run's save")
    saved = [json.loads(path.read_text()) for path in folder.glob("[0-9]*.json")]
    branch = [
        (situation, candidate)
        for situation in saved
        for candidate in situation["candidates"]
        if candidate["origin"] == "coaching"
    ]
    assert branch, "no coached candidate in the save"
    situation, candidate = branch[0]
    assert situation["input"]["extra_keys"]["coaching"] == payload
    assert candidate["output"] == payload["decision"]
    assert candidate["status"] == "optimal"


def _check_agent(gencoach: Path, url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(gencoach), "check-agent", url], capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip


def test_check_agent_passes_the_magma_agent(
    gencoach_bin: Path, magma_python: Path, processes: Processes, tmp_path: Path
) -> None:
    """`gencoach check-agent` passes an agent built from magma-core: its unwrapped proposals
    and its reading of `extra_keys.coaching` are what the checker expects."""
    url, _ = start_agent(magma_python, processes, tmp_path)
    result = _check_agent(gencoach_bin, url)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS coaching.failure" in result.stdout
    assert "PASS coaching.reinjection" in result.stdout


def test_check_agent_fails_the_magma_agent_that_ignores_its_correction(
    gencoach_bin: Path, magma_python: Path, processes: Processes, tmp_path: Path
) -> None:
    """The same agent answering reinjected inputs as any other fails the reinjection check,
    with the correction it ignored."""
    url, _ = start_agent(magma_python, processes, tmp_path, "--ignore-coaching")
    result = _check_agent(gencoach_bin, url)
    assert result.returncode == 1
    (line,) = [line for line in result.stdout.splitlines() if "coaching.reinjection" in line]
    assert line.startswith(
        "FAIL coaching.reinjection: a reinjected replace_decision under extra_keys.coaching "
        "was not applied"
    ), line
