"""`gencoach agent serve` and `gencoach check-agent`, as the root command will register them."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import httpx
import pytest
import typer
from typer.testing import CliRunner

from gencoach.agents.cli import agent_app, check_agent
from tests.agents.broken import broken_agent
from tests.agents.conftest import Serve
from tests.support.processes import free_port

SERVE = "from gencoach.agents.cli import agent_app; agent_app(prog_name='gencoach agent')"


def _root() -> typer.Typer:
    root = typer.Typer()
    root.add_typer(agent_app, name="agent")
    root.command("check-agent")(check_agent)
    return root


def _wait_ready(url: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        assert process.poll() is None, "the agent exited before it was ready"
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise AssertionError("the agent did not become ready")


@pytest.mark.slow
def test_serve_runs_a_conforming_agent_and_stops_on_sigterm() -> None:
    """`agent serve` serves an agent that passes check-agent, and exits 0 on SIGTERM."""
    port = free_port()
    command = [sys.executable, "-c", SERVE, "serve", "--port", str(port), "--detour", "0.5"]
    with subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    ) as process:
        try:
            _wait_ready(f"http://127.0.0.1:{port}", process)
            result = CliRunner().invoke(_root(), ["check-agent", f"http://127.0.0.1:{port}"])
            assert result.exit_code == 0, result.output
            assert "FAIL" not in result.output
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=15) == 0
            assert "agent.stopped" in process.communicate()[1]
        finally:
            if process.poll() is None:
                process.kill()


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
