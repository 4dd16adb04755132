"""`gencoach sim run` as a person uses it: its help, its one-line errors, a standalone run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis
import typer

from gencoach.cli import app
from gencoach.sim import SCENARIOS
from tests.support.agent_server import ScriptedAgent
from tests.support.generation_log import Tree, read_log
from tests.support.players import buttons_player
from tests.support.processes import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]


def sim_run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run `python -m gencoach sim run ARGS` and capture what it prints."""
    return subprocess.run(
        [sys.executable, "-m", "gencoach", "sim", "run", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
        check=False,
    )


def test_help_documents_every_option(tmp_path: Path) -> None:
    """`--help` lists every option of the command, and each one has a help text."""
    result = sim_run("--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    command = typer.main.get_command(app).commands["sim"].commands["run"]  # type: ignore[attr-defined]
    options = [param for param in command.params if param.name != "help"]
    assert len(options) == 18
    for param in options:
        assert param.help, f"{param.name} has no help"
        assert param.opts[0] in result.stdout, f"{param.opts[0]} is not in --help"
    help_text = " ".join(result.stdout.replace("│", " ").split())
    for name in SCENARIOS:  # the choices, each with what it plays
        assert f"{name}: " in help_text, name


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--scenario", "chess"], "valid choices: buttons, sorting, two_stage, text_question"),
        (["--envs", "0"], "'--envs'"),
        (["--injection-probability", "2"], "'--injection-probability'"),
        (["--branches", "many"], "'--branches'"),
        (["--colour", "red"], "No such option: --colour"),
        (["--redis-url", "redis://x", "--api-url", "http://x"], "not both"),
        (["--run-id", "a{b}"], "--run-id"),
    ],
)
def test_a_bad_option_fails_with_one_line(tmp_path: Path, args: list[str], expected: str) -> None:
    """A bad scenario or option prints one line naming it (and the choices), and exits 2."""
    result = sim_run("--agent-url", "http://127.0.0.1:9", *args, cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("gencoach sim run: ")
    assert expected in lines[0]
    assert result.stdout == ""


def test_a_missing_agent_url_fails_with_one_line(tmp_path: Path) -> None:
    """Without --agent-url, one line says it is missing."""
    result = sim_run(cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == "gencoach sim run: Missing option '--agent-url'."


def test_an_unreachable_redis_fails_with_one_line(tmp_path: Path) -> None:
    """A Redis that does not answer ends the run at once: one line, exit 1."""
    url = f"redis://127.0.0.1:{free_port()}/0"
    result = sim_run("--agent-url", "http://127.0.0.1:9", "--redis-url", url, cwd=tmp_path)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("gencoach sim run: Redis: ")


def test_a_standalone_run_writes_its_log(scripted_agent: ScriptedAgent, tmp_path: Path) -> None:
    """With no gencoach, the run writes `<run_id>.events.jsonl` and prints a one-line summary."""
    scripted_agent.answer = buttons_player("wrong_button")
    result = sim_run(
        "--agent-url", scripted_agent.url, "--run-id", "cli-1", "--seed", "3", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("run cli-1 (buttons): 3 situations, 6 candidates")
    tree = Tree.of(read_log(tmp_path / "cli-1.events.jsonl"))
    assert len(tree.situations) == 3
    assert tree.events[0]["env_options"]["seed"] == 3


def test_a_standalone_run_says_it_reported_nowhere(
    scripted_agent: ScriptedAgent, tmp_path: Path
) -> None:
    """Without --redis-url or --api-url the last line says nothing was reported, and how to."""
    scripted_agent.answer = buttons_player("wrong_button")
    result = sim_run("--agent-url", scripted_agent.url, "--run-id", "cli-2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == (
        "reported to no gencoach (standalone): give --redis-url or --api-url to report"
    )


def test_an_unreachable_agent_is_named_in_the_summary(tmp_path: Path) -> None:
    """A wrong agent port shows the first error's text, not only a count of errors, and
    the run exits 1 naming the failed call after its summary."""
    url = f"http://127.0.0.1:{free_port()}"
    result = sim_run("--agent-url", url, "--run-id", "cli-3", "--timeout-s", "2", cwd=tmp_path)
    summary = result.stdout.splitlines()[0]
    assert "errors; first: " in summary, result.stdout + result.stderr
    assert "127.0.0.1" in summary or "connect" in summary.lower(), summary
    assert result.returncode == 1
    last = result.stderr.splitlines()[-1]
    assert last.startswith("gencoach sim run: the agent crashed: agent_call_failed: "), last


def test_a_run_reports_where_the_config_file_says(
    scripted_agent: ScriptedAgent, tmp_path: Path, redis_client: redis.Redis, redis_url: str
) -> None:
    """With ./gencoach.yaml naming a Redis and no --redis-url, the run reports there."""
    (tmp_path / "gencoach.yaml").write_text(f"redis: {{url: '{redis_url}', key_prefix: cfg}}\n")
    scripted_agent.answer = buttons_player("wrong_button")
    result = sim_run(
        "--agent-url", scripted_agent.url, "--run-id", "cli-4", "--branch-grace-s", "0",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == f"reported to Redis {redis_url} (stream cfg:events)"
    assert redis_client.xlen("cfg:events") > 0


def test_a_config_on_embedded_redis_without_serve_says_so(tmp_path: Path) -> None:
    """The embedded default with no `serve` running is one line and exit 1, not a private run."""
    (tmp_path / "gencoach.yaml").write_text("output_dir: out\n")
    result = sim_run("--agent-url", "http://127.0.0.1:1", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "gencoach sim run: no embedded Redis runs for output dir out: start `gencoach serve` "
        "with the same configuration first, or set redis.url to a shared Redis"
    ]
