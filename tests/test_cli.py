"""The `gencoach` command: version, help, and `config check` as a person sees them."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gencoach.__about__ import __version__


def _gencoach(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gencoach", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", **(env or {})},
        check=False,
    )


def test_version(tmp_path: Path) -> None:
    """`--version` prints the package version and exits 0."""
    result = _gencoach("--version", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout.strip() == f"gencoach {__version__}"


def test_help_lists_the_commands(tmp_path: Path) -> None:
    """`--help` names the subcommands a user needs."""
    result = _gencoach("--help", cwd=tmp_path)
    assert result.returncode == 0
    for command in ("serve", "save", "health", "config"):
        assert command in result.stdout


def test_config_check_prints_defaults_without_a_file(tmp_path: Path) -> None:
    """With no file, `config check` prints the embedded defaults and exits 0."""
    result = _gencoach("config", "check", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "url: embedded" in result.stdout
    assert "max_pending_per_stage: 5" in result.stdout


SECRET_CONFIG = """
coaching:
  enabled: true
backends:
  local:
    type: ollama
    endpoint: http://127.0.0.1:11434/v1/chat/completions
    default_model: qwen3:8b
    timeout: 30
    max_retry: 3
    headers:
      Authorization: Bearer sk-very-secret
      Content-type: application/json
"""


def test_config_check_redacts_secrets_in_output_and_logs(tmp_path: Path) -> None:
    """A secret header never reaches the printed config nor the debug log of loading it."""
    (tmp_path / "gencoach.yaml").write_text(SECRET_CONFIG)
    result = _gencoach("config", "check", cwd=tmp_path, env={"GENCOACH_LOG__LEVEL": "debug"})
    assert result.returncode == 0, result.stderr
    assert "Authorization: '**********'" in result.stdout
    assert "Content-type: application/json" in result.stdout
    assert '"config.loaded"' in result.stderr
    assert "sk-very-secret" not in result.stdout + result.stderr


def test_config_check_reports_every_problem_and_exits_2(tmp_path: Path) -> None:
    """A bad file lists each problem with its key path and value, and exits 2."""
    config = tmp_path / "bad.yaml"
    config.write_text("coaching:\n  max_pending_per_stage: 0\n  enabled: yes\nredis:\n  urll: x\n")
    result = _gencoach("config", "check", str(config), cwd=tmp_path)
    assert result.returncode == 2
    assert "coaching.max_pending_per_stage" in result.stderr
    assert "(got 0)" in result.stderr
    assert "redis.urll: unknown key" in result.stderr
    assert "coaching.enabled" in result.stderr
    assert result.stdout == ""


def test_health_fails_when_no_controller_answers(tmp_path: Path) -> None:
    """`health` exits 1 with the URL it tried when nothing listens."""
    result = _gencoach("health", cwd=tmp_path, env={"GENCOACH_API__PORT": "1"})
    assert result.returncode == 1
    assert "unhealthy: http://127.0.0.1:1/health unreachable" in result.stderr


def test_serve_refuses_a_public_address_without_a_token(tmp_path: Path) -> None:
    """`serve` on 0.0.0.0 without a token exits 2 with one line saying why, before any Redis."""
    result = _gencoach("serve", cwd=tmp_path, env={"GENCOACH_API__HOST": "0.0.0.0"})  # noqa: S104
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "gencoach serve: refusing to serve the API on 0.0.0.0:8750 without a token: set "
        "api.token_env to a variable holding one (GENCOACH_API__TOKEN_ENV=GENCOACH_API_TOKEN "
        "and GENCOACH_API_TOKEN=...), or set api.host to 127.0.0.1"
    ]
    assert not (tmp_path / "output").exists()


_LOADED_AT_EXIT = """
import atexit, sys
HEAVY = {"fastapi", "starlette", "uvicorn", "rq", "redis"}
OURS = ("gencoach.service", "gencoach.workers", "gencoach.console", "gencoach.demo")
def report():
    loaded = {name.split(".")[0] for name in sys.modules} & HEAVY
    loaded |= {name for name in sys.modules if name.startswith(OURS)}
    print("LOADED", ",".join(sorted(loaded)), file=sys.stderr)
atexit.register(report)
sys.argv = ["gencoach", *sys.argv[1:]]
from gencoach.cli import main
main()
"""


@pytest.mark.parametrize(
    "args",
    [["--version"], ["--help"], ["config", "check"], ["health", "--timeout", "0.2"]],
    ids=" ".join,
)
def test_quick_commands_import_no_server_code(tmp_path: Path, args: list[str]) -> None:
    """--version, --help, config check and health start without the web stack, RQ or Redis."""
    result = subprocess.run(
        [sys.executable, "-c", _LOADED_AT_EXIT, *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "GENCOACH_API__PORT": "1"},
        check=False,
    )
    loaded = [line for line in result.stderr.splitlines() if line.startswith("LOADED")]
    assert loaded == ["LOADED "], result.stderr


@pytest.mark.parametrize("command", [[], ["sim", "run"], ["export"], ["agent", "serve"]], ids=str)
def test_help_shows_no_bool_type_after_flags(tmp_path: Path, command: list[str]) -> None:
    """Flags such as --help and --progress/--no-progress are listed without `<bool>`."""
    result = _gencoach(*command, "--help", cwd=tmp_path, env={"COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    assert "--help" in result.stdout
    assert "<bool>" not in result.stdout


def test_scenario_help_reads_as_one_sentence_per_scenario(tmp_path: Path) -> None:
    """The scenarios in `sim run --help` are separated by '; ' without a stray period."""
    result = _gencoach("sim", "run", "--help", cwd=tmp_path, env={"COLUMNS": "400"})
    assert "on a tabletop; sorting:" in result.stdout
    assert ".;" not in result.stdout


def test_serve_on_a_port_in_use_says_so_in_one_line(tmp_path: Path, redis_url: str) -> None:
    """`serve` whose API port is taken exits 1 with one line naming the address, no traceback."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        environment = {
            "GENCOACH_REDIS__URL": redis_url,
            "GENCOACH_API__PORT": str(port),
            "GENCOACH_LOG__LEVEL": "error",
        }
        result = _gencoach("serve", cwd=tmp_path, env=environment)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"gencoach serve: cannot listen on 127.0.0.1:{port}: Address already in use"
    )


def test_serve_prints_its_summary_first(tmp_path: Path, redis_url: str) -> None:
    """`serve` starts by printing where Redis and the API are and whether coaching is on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    environment = {
        "PATH": "/usr/bin:/bin",
        "GENCOACH_REDIS__URL": redis_url,
        "GENCOACH_API__PORT": str(port),
        "GENCOACH_LOG__LEVEL": "error",
    }
    with subprocess.Popen(
        [sys.executable, "-m", "gencoach", "serve"],
        cwd=tmp_path,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as process:
        try:
            assert process.stdout is not None
            lines = [process.stdout.readline().rstrip("\n") for _ in range(8)]
        finally:
            process.terminate()
            process.wait(timeout=30)
    assert lines[0].startswith(f"redis:    {redis_url}, key prefix gencoach")
    assert lines[1] == (
        f"api:      http://127.0.0.1:{port}/ (no token: reachable from this machine only)"
    )
    assert lines[2] == f"metrics:  http://127.0.0.1:{port}/metrics (Prometheus); " + (
        "`gencoach status` shows them"
    )
    assert lines[4].startswith("coaching: off (coaching.enabled is false")
    assert lines[7] == f"output:   {tmp_path / 'output'}"


def test_worker_without_serve_embedded_redis_says_so(tmp_path: Path) -> None:
    """`worker` on the embedded default with no `serve` running exits 1 in one line."""
    result = _gencoach("worker", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "gencoach worker: no embedded Redis runs for output dir output: start `gencoach "
        "serve` with the same configuration first, or set redis.url to a shared Redis"
    ]


def test_every_settings_command_takes_config_after_its_name(tmp_path: Path) -> None:
    """`gencoach CMD -c F` reads F as `gencoach --config F CMD` does, for each command that
    reads the settings; the same file given twice is fine, two different ones are not."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("redis:\n  urll: x\n")
    commands = (["serve"], ["worker"], ["health"], ["save", "r1"], ["config", "check"], ["status"])
    for command in commands:
        after = _gencoach(*command, "-c", str(bad), cwd=tmp_path)
        before = _gencoach("--config", str(bad), *command, cwd=tmp_path)
        assert (after.returncode, before.returncode) == (2, 2), command
        assert "redis.urll: unknown key" in after.stderr, command
        assert after.stderr == before.stderr, command
    good = tmp_path / "good.yaml"
    good.write_text("api:\n  port: 1\n")
    same = _gencoach("--config", str(good), "health", "--config", str(good), cwd=tmp_path)
    assert "http://127.0.0.1:1/health" in same.stderr
    both = _gencoach("--config", str(good), "health", "--config", str(bad), cwd=tmp_path)
    assert both.returncode == 2
    assert f"--config given twice, as {good} and as {bad}: give it once" in both.stderr


def test_a_magma_config_file_loads_with_one_notice_naming_its_own_sections(
    tmp_path: Path,
) -> None:
    """MAGMA's top-level sections are ignored with one notice line that names them."""
    config = tmp_path / "magma.yaml"
    config.write_text(
        "magma_agent_address: http://localhost:8888\ngenerate: {nb_branch: 2}\n"
        "benchmark: {seed: 42}\ncoaching: {enabled: false}\n"
    )
    result = _gencoach("config", "check", "--config", str(config), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    notices = [line for line in result.stderr.splitlines() if "magma_sections_ignored" in line]
    assert len(notices) == 1
    for section in ("benchmark", "generate", "magma_agent_address"):
        assert section in notices[0]


def test_worker_refuses_an_unknown_mode(tmp_path: Path) -> None:
    """`worker --mode threads` names the two modes and exits 2 before starting anything."""
    result = _gencoach("worker", "--mode", "threads", cwd=tmp_path)
    assert result.returncode == 2
    assert "--mode must be async or fork, not 'threads'" in result.stderr
