"""`gencoach sim gym`: a real process playing an adapter; clear errors; lazy imports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from gencoach.agents import create_agent_app
from gencoach.agents.reference import reference_info
from gencoach.constants import EVENT_FIELD, Keys
from tests.support.agent_server import ScriptedAgent, ThreadedServer
from tests.support.integrations import env_agent
from tests.support.lake import walker
from tests.support.streams import entries

pytestmark = pytest.mark.slow


def gencoach(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the CLI in a child process."""
    command = [sys.executable, "-m", "gencoach", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def test_the_cli_imports_neither_gymnasium_nor_minigrid() -> None:
    """Importing the CLI (and running another command) never loads the simulators."""
    code = "import sys, gencoach.cli; print(sorted({'gymnasium', 'minigrid'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("adapter", "message"),
    [
        ("no_colon", "'no_colon' is not MODULE:ADAPTER"),
        ("no.such.module:X", "cannot import no.such.module"),
        ("gencoach.integrations.minigrid:nothing", "has no 'nothing'"),
        ("gencoach.integrations.minigrid:LEVELS", "is a tuple, not a GymAdapter"),
    ],
)
def test_a_wrong_adapter_is_named_on_one_line(adapter: str, message: str) -> None:
    """A bad MODULE:ADAPTER exits 2 with one line that says what is wrong."""
    done = gencoach("sim", "gym", adapter, "--agent", "http://127.0.0.1:1", "--redis-url", "x")
    assert done.returncode == 2
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_sim_gym_plays_runs_and_reports_them(
    redis_url: str, redis_client: redis.Redis, scripted_agent: ScriptedAgent
) -> None:
    """Three FrozenLake runs from the command line: each run's events, its summary line;
    the same campaign again exits 0, its runs already finished."""
    scripted_agent.answer = walker
    done = gencoach(
        "sim", "gym", "tests.integrations.frozenlake:FrozenLake",
        "--agent", scripted_agent.url, "--redis-url", redis_url, "--runs", "3",
        "--concurrency", "2", "--branch-grace-s", "0", "--campaign", "cli",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("3 runs: ")
    assert "candidates asked, 0 coached" in done.stdout
    events: list[dict[str, Any]] = [
        json.loads(fields[EVENT_FIELD.encode()])
        for _, fields in entries(redis_client, Keys().events)
    ]
    finished = {e["run_id"] for e in events if e["type"] == "run.finished"}
    assert finished == {"cli-0", "cli-1", "cli-2"}
    # Run again, the campaign finds its runs finished: no stage ends now, and no failure.
    again = gencoach(
        "sim", "gym", "tests.integrations.frozenlake:FrozenLake",
        "--agent", scripted_agent.url, "--redis-url", redis_url, "--runs", "3",
        "--campaign", "cli",
    )  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    assert "3 already finished" in again.stdout


class PoppingPolicy:
    """A policy with the bug of a non-thread-safe env: it pops from an empty list."""

    async def decide(self, agent_input: Any, memory: Any, count: int) -> Any:
        """Raise IndexError as `[].pop()` does."""
        return [[].pop()]


def test_an_agent_that_raises_fails_sim_gym_naming_the_cause(redis_url: str) -> None:
    """Every candidate is the toolkit's `policy_crashed`: sim gym prints its counts, then
    exits 1 with one line naming the exception (it printed `2 errors` and exited 0)."""
    info = reference_info().model_copy(update={"specialized_coaching": []})
    server = ThreadedServer(create_agent_app(info, PoppingPolicy()))
    server.start()
    try:
        done = gencoach(
            "sim", "gym", "tests.integrations.frozenlake:FrozenLake", "--agent", server.url,
            "--redis-url", redis_url, "--runs", "2", "--branch-grace-s", "0",
            "--campaign", "crashing",
        )  # fmt: skip
    finally:
        server.stop()
    assert done.returncode == 1, done.stdout + done.stderr
    assert "2 candidates asked, 0 coached (0 invalid, 2 errors; first: policy_crashed" in (
        done.stdout
    )
    line = done.stderr.splitlines()[-1]
    assert line.startswith("gencoach sim gym: the agent crashed: policy_crashed: IndexError: ")
    assert "pop from empty list" in line


def test_a_campaign_where_no_stage_ended_fails_sim_gym(
    redis_url: str, scripted_agent: ScriptedAgent
) -> None:
    """An agent whose every answer is refused by the tools (a tabletop call) ends no stage:
    sim gym exits 1 saying so."""
    done = gencoach(
        "sim", "gym", "tests.integrations.frozenlake:FrozenLake", "--agent", scripted_agent.url,
        "--redis-url", redis_url, "--branch-grace-s", "0", "--campaign", "refused",
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 candidates asked, 0 coached (1 invalid, 0 errors), stage ends: none" in done.stdout
    assert done.stderr.splitlines()[-1].startswith("gencoach sim gym: no stage ended")


def test_the_env_agent_serves_an_adapter_and_keeps_the_protocol(tmp_path: Path) -> None:
    """`agent serve --env MODULE:ADAPTER` (the oracle policy by default) passes check-agent,
    announcing itself after the adapter."""
    with env_agent(tmp_path, "gencoach.integrations.textrooms:rooms") as url:
        done = gencoach("check-agent", url)
        info = httpx.get(f"{url}/v1/info").json()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "FAIL" not in done.stdout
    assert info["agent_id"] == "gencoach-env-textrooms"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--env", "no.such.module:X"], "cannot import no.such.module"),
        (["--env", "gencoach.integrations.textrooms:rooms", "--policy", "scripted"], "--policy"),
        (["--env", "gencoach.integrations.textrooms:rooms", "--world", "babyai"], "--world"),
        (["--policy", "oracle"], "give --env"),
        (["--env", "gencoach.integrations.textrooms:rooms", "--policy", "llm"], "--model"),
    ],
)
def test_agent_serve_env_refuses_what_it_cannot_serve(args: list[str], message: str) -> None:
    """A wrong adapter or a policy the env agent has not is a usage error (exit 2) naming it."""
    done = gencoach("agent", "serve", "--port", "1", *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr
