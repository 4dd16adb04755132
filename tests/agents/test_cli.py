"""`gencoach agent serve` and `gencoach check-agent`, as the root command will register them."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from gencoach.agents.cli import agent_app, check_agent
from tests.agents.broken import broken_agent
from tests.support.agent_server import Serve
from tests.support.processes import answers_200, free_port, log_tail, wait_started

SERVE = "from gencoach.agents.cli import agent_app; agent_app(prog_name='gencoach agent')"


def _root() -> typer.Typer:
    root = typer.Typer()
    root.add_typer(agent_app, name="agent")
    root.command("check-agent")(check_agent)
    return root


@pytest.mark.slow
def test_serve_runs_a_conforming_agent_and_stops_on_sigterm(tmp_path: Path) -> None:
    """`agent serve` serves an agent that passes check-agent, and exits 0 on SIGTERM."""
    port, output = free_port(), tmp_path / "agent.log"
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-c", SERVE, "serve", "--port", str(port), "--detour", "0.5"]
    with output.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    try:
        wait_started(lambda: answers_200(f"{url}/health"), process, output, "the agent")
        result = CliRunner().invoke(_root(), ["check-agent", url])
        assert result.exit_code == 0, result.output
        assert "FAIL" not in result.output
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=15) == 0, log_tail(output)
        assert "agent.stopped" in output.read_text(errors="replace")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


def test_serve_refuses_the_llm_policy_without_a_model() -> None:
    """`--policy llm` without `--model` is a usage error naming the option."""
    result = CliRunner().invoke(_root(), ["agent", "serve", "--policy", "llm"])
    assert result.exit_code == 2
    assert "--model" in result.output


def test_serve_refuses_a_rate_above_one() -> None:
    """A mistake rate outside [0, 1] is a usage error naming the option."""
    result = CliRunner().invoke(_root(), ["agent", "serve", "--detour", "1.5"])
    assert result.exit_code == 2
    assert "--detour" in result.output


def test_check_agent_exits_1_on_a_broken_agent(serve: Serve) -> None:
    """`check-agent URL` prints a FAIL line and exits 1 when a rule is broken."""
    url = serve(broken_agent("protocol_version"))
    result = CliRunner().invoke(_root(), ["check-agent", url, "--timeout", "5"])
    assert result.exit_code == 1
    assert "FAIL info.protocol_version: protocol_version is '1.0'" in result.output
