"""The `gencoach` command: version, help, and `config check` as a person sees them."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
import typer
from redis.asyncio import Redis as AsyncRedis
from typer.testing import CliRunner

from gencoach.__about__ import __version__
from gencoach.cli import app
from gencoach.constants import Keys
from gencoach.graph import read_save
from gencoach.protocol import parse_event
from gencoach.service.store.graphstore import GraphStore
from tests.support.graphs import known_run_events
from tests.support.processes import free_port


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


def test_health_waits_for_any_server_named_by_url(tmp_path: Path) -> None:
    """`health --url U --wait S` asks U's /health until it answers 200, for up to S seconds."""
    port = free_port()
    delayed = subprocess.Popen(  # a server that starts a second late
        [sys.executable, "-c", f"import time, http.server as h; time.sleep(1); "
         f"h.HTTPServer(('127.0.0.1', {port}), h.SimpleHTTPRequestHandler).serve_forever()"],
        cwd=tmp_path,
    )  # fmt: skip
    (tmp_path / "health").write_text("ok")
    try:
        url = f"http://127.0.0.1:{port}"
        result = _gencoach("health", "--url", url, "--wait", "30", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == f"healthy: {url}/health"
    finally:
        delayed.kill()
        delayed.wait(10)
    gone = _gencoach("health", "--url", f"http://127.0.0.1:{port}", "--wait", "0.5", cwd=tmp_path)
    assert gone.returncode == 1
    assert f"unhealthy: http://127.0.0.1:{port}/health unreachable" in gone.stderr


def test_config_check_says_serve_would_refuse_a_public_address_without_a_token(
    tmp_path: Path,
) -> None:
    """`config check` with api.host 0.0.0.0 and no token prints the settings (exit 0: the
    file is valid) and says, in serve's own words, that `serve` would refuse them; the
    token variable's warning says the same, not that the API is open."""
    (tmp_path / "gencoach.yaml").write_text("api: {host: 0.0.0.0, token_env: API_TOKEN}\n")
    result = _gencoach("config", "check", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "host: 0.0.0.0" in result.stdout
    assert "open to whoever" not in result.stderr
    assert (
        "API_TOKEN is not set; the API has no token, so `gencoach serve` will refuse to "
        "serve it on 0.0.0.0:8750"
    ) in result.stderr
    assert result.stderr.splitlines()[-1] == (
        "gencoach config check: `gencoach serve` would exit 2, refusing to serve the API on "
        "0.0.0.0:8750 without a token: set api.token_env to a variable holding one "
        "(GENCOACH_API__TOKEN_ENV=GENCOACH_API_TOKEN and GENCOACH_API_TOKEN=...) or "
        "api.token_file to a file holding one, or set api.host to 127.0.0.1"
    )
    with_token = _gencoach("config", "check", cwd=tmp_path, env={"API_TOKEN": "t0ken-value"})
    assert with_token.returncode == 0, with_token.stderr
    assert "serve" not in with_token.stderr


def test_serve_refuses_a_public_address_without_a_token(tmp_path: Path) -> None:
    """`serve` on 0.0.0.0 without a token exits 2 with one line saying why, before any Redis."""
    result = _gencoach("serve", cwd=tmp_path, env={"GENCOACH_API__HOST": "0.0.0.0"})  # noqa: S104
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "gencoach serve: refusing to serve the API on 0.0.0.0:8750 without a token: set "
        "api.token_env to a variable holding one (GENCOACH_API__TOKEN_ENV=GENCOACH_API_TOKEN "
        "and GENCOACH_API_TOKEN=...) or api.token_file to a file holding one, or set api.host "
        "to 127.0.0.1"
    ]
    assert not (tmp_path / "output").exists()


_LOADED_AT_EXIT = """
import atexit, sys
atexit.register(lambda: print("LOADED", *sorted(sys.modules), file=sys.stderr))
sys.argv = ["gencoach", *sys.argv[1:]]
from gencoach.cli import main
main()
"""
# The web stack, RQ, and gencoach's server code: what only `serve`, `worker`, `demo`
# and `console` run.
_SERVER_PACKAGES = {"fastapi", "starlette", "uvicorn", "rq"}
_SERVER_CODE = (
    "gencoach.service.controller", "gencoach.service.web.api", "gencoach.service.web.httpserver",
    "gencoach.service.pipeline", "gencoach.service.store.intake", "gencoach.workers",
    "gencoach.console", "gencoach.demo",
)  # fmt: skip


def _loaded(tmp_path: Path, args: list[str], env: dict[str, str]) -> set[str]:
    """The modules a `gencoach` command had loaded when it exited."""
    result = subprocess.run(
        [sys.executable, "-c", _LOADED_AT_EXIT, *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
        env={"PATH": "/usr/bin:/bin", **env},
    )  # fmt: skip
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("LOADED ")]
    return set(line.split()[1:])


def _server_side(loaded: set[str]) -> list[str]:
    """The server packages and server code among `loaded`."""
    packages = {name.split(".")[0] for name in loaded} & _SERVER_PACKAGES
    return sorted(packages | {name for name in loaded if name.startswith(_SERVER_CODE)})


@pytest.mark.parametrize(
    "args",
    [["--version"], ["--help"], ["config", "check"], ["health", "--timeout", "0.2"],
     ["save", "--help"], ["export", "--help"], ["status", "--help"]],
    ids=" ".join,
)  # fmt: skip
def test_quick_commands_import_no_server_code(tmp_path: Path, args: list[str]) -> None:
    """--version, --help, config check, health and the commands' help start without the
    web stack, RQ, Redis's client or any of gencoach's service code."""
    loaded = _loaded(tmp_path, args, {"GENCOACH_API__PORT": "1"})
    assert _server_side(loaded) == []
    assert {name for name in loaded if name == "redis" or name.startswith("gencoach.service")} == (
        set()
    )


def _seed_known_run(redis_url: str, run_id: str) -> None:
    """The known run (not finished) in Redis, written by the graph store as the controller
    writes it."""

    async def seed() -> None:
        client = AsyncRedis.from_url(redis_url)
        events = [
            parse_event({"type": kind, "run_id": run_id, "seq": seq, **fields})
            for seq, (kind, fields) in enumerate(known_run_events()[:-1])
        ]
        await GraphStore(client, Keys()).apply(events)
        await client.aclose()

    anyio.run(seed)


def test_save_export_and_library_import_no_server_code(
    tmp_path: Path, redis_url: str, redis_client: Any
) -> None:
    """`gencoach save` writes a run's save from Redis with the graph store and the
    persister only, and the export and the library built from it run without the web
    stack, RQ, the controller or the workers' code either."""
    _seed_known_run(redis_url, "r1")
    env = {"GENCOACH_REDIS__URL": redis_url, "GENCOACH_OUTPUT_DIR": str(tmp_path / "out")}
    saving = _loaded(tmp_path, ["save", "r1"], env)
    assert read_save(tmp_path / "out" / "r1").config.run_id == "r1"
    assert "gencoach.service.saving.persist" in saving
    assert _server_side(saving) == []
    for args, wrote in [
        # The known run's agent never announced its identity: accepted by name.
        (["export", "out", "--format", "chat", "--any-agent"], "out/datasets/chat/chat.jsonl"),
        (["library", "build", "out", "--output", "lib"], "lib/manifest.json"),
        (["library", "query", "lib"], None),
        (["status"], None),
    ]:
        loaded = _loaded(tmp_path, args, {"GENCOACH_API__PORT": "1"})
        assert _server_side(loaded) == [], args
        assert wrote is None or (tmp_path / wrote).is_file(), args


# What `--version` may load of gencoach: the command modules that declare the options.
_VERSION_LOADS = {
    "gencoach", "gencoach.__about__", "gencoach.cli", "gencoach.constants", "gencoach.errors",
    "gencoach.runtime", "gencoach.runtime.lazy", "gencoach.agents", "gencoach.agents.cli",
    "gencoach.agents.defaults",
    "gencoach.library", "gencoach.library.cli", "gencoach.library.errors",
    "gencoach.library.query", "gencoach.library.records", "gencoach.sim",
    "gencoach.sim.catalog", "gencoach.sim.cli",
}  # fmt: skip
_VERSION_PROBE = """
import sys
sys.argv = ["gencoach", "--version"]
from gencoach.cli import main
try:
    main()
except SystemExit:
    pass
print(" ".join(sorted(sys.modules)))
"""


def test_version_imports_neither_the_simulator_nor_pydantic(tmp_path: Path) -> None:
    """`gencoach --version` loads the command's options only: no simulator world, library
    adapter, exporter, settings or HTTP client."""
    result = subprocess.run(
        [sys.executable, "-c", _VERSION_PROBE],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=True,
        env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    loaded = set(result.stdout.split()[2:])
    assert {name for name in loaded if name.startswith("gencoach")} == _VERSION_LOADS
    heavy = {"pydantic", "httpx", "yaml", "redis", "rq", "structlog"}
    assert {name.split(".")[0] for name in loaded} & heavy == set()


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
    port = free_port()
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


def _leaf_commands(command: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    if hasattr(command, "commands"):
        return [
            leaf
            for name, sub in sorted(command.commands.items())
            for leaf in _leaf_commands(sub, (*path, name))
        ]
    return [path]


def _option_names(path: tuple[str, ...]) -> list[str]:
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]  # type: ignore[attr-defined]
    return [name for param in command.params for name in param.opts + param.secondary_opts
            if name.startswith("--")]  # fmt: skip


@pytest.mark.parametrize("path", _leaf_commands(typer.main.get_command(app)), ids=" ".join)
def test_help_fits_80_columns_with_every_option_name_whole(path: tuple[str, ...]) -> None:
    """At 80 columns every command's help shows each of its option names in full."""
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.output.splitlines()) <= 80
    cut = [name for name in _option_names(path) if name not in result.output.split()]
    assert cut == [], result.output
