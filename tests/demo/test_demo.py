"""`gencoach demo` from the command line: it runs to its summary, its saves hold proven
coached branches of each route, and Ctrl-C leaves no process and no Redis behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gencoach.graph import read_save
from tests.support.controller import wait_for
from tests.support.llm_server import error, held, scripted_llm_servers
from tests.support.processes import descendants, pid_alive, wait_gone
from tests.support.saves import assert_audit_clean

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

ROUTE_TYPES = {
    "format": "format_error:format_fix",
    "failure": "failure:diagnosis",
    "suboptimal": "finish_suboptimal:suboptimal_diagnosis",
}


def _demo(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gencoach", "demo", "--output", str(tmp_path), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def test_demo_runs_and_saves_proven_coaching_of_each_route(tmp_path: Path) -> None:
    """The demo exits 0 after its summary, and its saved graphs load with the reader, hold
    coached branches of the format, failure and suboptimal routes, some proven, and some
    recoveries after a bad call, and pass the audit."""
    demo = _demo(tmp_path, "--max-wall-s", "60")
    output, _ = demo.communicate(timeout=200)
    assert demo.returncode == 0, output
    assert "gencoach demo: done in" in output
    assert "saved graphs:" in output
    (graphs,) = tmp_path.glob("demo-*/graphs")
    saves = [read_save(config.parent) for config in graphs.glob("*/config.json")]
    assert len(saves) == 4
    coached = [c for save in saves for c in save.candidates.values() if c.origin == "coaching"]
    for route, type_coaching in ROUTE_TYPES.items():
        branch = [c for c in coached if c.coaching.type_coaching == type_coaching]
        assert branch, f"no coached {route} branch in {output}"
    proven = [
        c for c in coached if any(score.optimal + score.non_optimal for score in c.score.values())
    ]
    assert proven, output
    # The campaign holds the coaching invariants, and restarts after a bad call's feedback.
    report = assert_audit_clean(graphs)
    assert report.recovery_nodes > 0, output


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return ""


def test_ctrl_c_leaves_no_process_and_no_redis(tmp_path: Path) -> None:
    """SIGINT while the demo runs stops the controller, workers, agent and Redis it started.

    Coaching waits on a model that answers only once the test is over, so the demo is
    still running when the interrupt comes, however fast the machine."""
    gate = threading.Event()
    with scripted_llm_servers() as start:
        server = start(held(gate))
        try:
            _interrupt_demo(tmp_path, server.endpoint)
        finally:
            gate.set()


def _interrupt_demo(tmp_path: Path, endpoint: str) -> None:
    # Every wait given, so the demo times no model call before it starts; the runs' waits
    # outlast the test, so the demo cannot end on its own before the interrupt.
    waits = ["--agent-timeout", "60", "--branch-grace", "900", "--max-wall-s", "900"]
    waits += ["--job-timeout", "900", "--llm-timeout", "900"]
    demo = _demo(
        tmp_path, *("--llm-endpoint", endpoint, "--model", "m", "--coach-with-llm"), *waits
    )
    assert demo.stdout is not None
    started = time.monotonic()
    for line in demo.stdout:
        if "gencoach demo" in line and "controller http" in line:
            break
        assert time.monotonic() - started < 60, "the demo did not start"

    def everything_running() -> list[int] | None:
        tree = descendants(demo.pid)
        commands = [_cmdline(pid) for pid in tree]
        return tree if len(tree) >= 4 and any("redis-server" in c for c in commands) else None

    # controller, workers, agent and Redis run under the demo
    tree = wait_for(everything_running, timeout_s=60, what="the demo's processes")
    os.kill(demo.pid, signal.SIGINT)
    output, _ = demo.communicate(timeout=60)
    # 130 from the demo's own handling; -SIGINT when the interrupt is raised again as the
    # interpreter exits, after the demo stopped everything (its message below says so).
    assert demo.returncode in (130, -signal.SIGINT), output
    assert "interrupted" in output
    assert all(wait_gone(pid, timeout_s=10) for pid in tree), [p for p in tree if pid_alive(p)]


def test_a_model_refusing_the_structured_output_is_named_in_the_summary(tmp_path: Path) -> None:
    """Coaching the scripted agent with a model whose server refuses json_schema (set
    explicitly): the demo still ends with its summary, naming the cause and the fix."""
    refusal = "('body', 'response_format', 'type'): Input should be 'text' or 'json_object'"
    with scripted_llm_servers() as start:
        server = start(error(500, refusal))
        demo = _demo(
            tmp_path,
            *("--scenario", "buttons", "--envs", "1", "--max-wall-s", "20"),
            *("--llm-endpoint", server.endpoint, "--model", "m", "--coach-with-llm"),
            *("--structured-output", "json_schema", "--job-timeout", "30"),
        )
        output, _ = demo.communicate(timeout=200)
    assert demo.returncode == 0, output
    assert "no proven correction this time for:" in output
    assert "cause: backend llm refused json_schema; set structured_output: json_object" in output
    coached = [r for r in server.requests if r.body and "response_format" in r.body]
    assert coached, "the model was asked to coach"
    assert all(r.body["response_format"]["type"] == "json_schema" for r in coached)


def test_demo_plays_any_adapter_with_the_env_agent(tmp_path: Path) -> None:
    """`demo --env MODULE:ADAPTER` plays the text rooms with the env agent's oracle policy
    and mistakes, coached by the module's oracle teacher: corrections are proven and the
    saves pass the audit."""
    demo = _demo(tmp_path, "--env", "gencoach.integrations.textrooms:rooms", "--envs", "3")
    output, _ = demo.communicate(timeout=200)
    assert demo.returncode == 0, output
    assert "textrooms: 3 runs: " in output
    (graphs,) = tmp_path.glob("demo-*/graphs")
    saves = [read_save(config.parent) for config in graphs.glob("*/config.json")]
    assert len(saves) == 3
    coached = [c for save in saves for c in save.candidates.values() if c.origin == "coaching"]
    assert any(any(s.optimal + s.non_optimal for s in c.score.values()) for c in coached), output
    assert_audit_clean(graphs)


def test_demo_names_an_adapter_module_without_a_teacher(tmp_path: Path) -> None:
    """An adapter whose module has no oracle teacher is refused up front, saying what to add."""
    demo = _demo(tmp_path, "--env", "tests.integrations.frozenlake:FrozenLake")
    output, _ = demo.communicate(timeout=60)
    assert demo.returncode == 1, output
    assert "tests.integrations.frozenlake has no teacher: add `teacher = OracleTeacher" in output
    assert "Traceback" not in output
