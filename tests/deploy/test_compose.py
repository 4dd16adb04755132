"""compose.yaml without a Docker engine: its shape, and each service's command run as a process.

What this cannot run: the image build, Compose's own parsing, container networking and
volumes, healthchecks and `depends_on` conditions, `--scale`. The processes below run the
same commands with the same variables, on loopback ports instead of service names.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from tests.deploy.compose import COMPOSE_FILE, interpolate, load_compose, service_environment
from tests.support.controller import wait_for
from tests.support.processes import free_port, kill_tree, wait_gone

TOKEN = "compose-test-token-0123456789"
GENCOACH = str(Path(sys.executable).parent / "gencoach")
GENCOACH_SERVICES = ("controller", "worker", "agent", "simulator")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    """The parsed compose.yaml."""
    return load_compose()


def test_every_service_is_declared(compose: dict[str, Any]) -> None:
    """Redis, the controller and workers always run; agent and simulator under a profile."""
    services = compose["services"]
    assert set(services) == {"redis", *GENCOACH_SERVICES}
    for name in ("redis", "controller", "worker"):
        assert "profiles" not in services[name], f"{name} must start without a profile"
    for name in ("agent", "simulator"):
        assert services[name]["profiles"] == ["reference"]
    for name in GENCOACH_SERVICES:
        assert services[name]["build"] == ".", f"{name} runs the repository's image"
        assert services[name]["command"][0] == "gencoach"


def test_every_pulled_image_has_an_exact_tag(compose: dict[str, Any]) -> None:
    """An image compose pulls names an exact version (`redis:7.0.15-alpine`, or a digest),
    never a moving tag such as `redis:7-alpine` or `latest`; only the built image is local."""
    for name, service in compose["services"].items():
        image = service["image"]
        if "build" in service:
            assert image == "gencoach:local", name
            continue
        assert re.fullmatch(r"[\w./-]+:\d+\.\d+\.\d+(-[\w.]+)?(@sha256:[0-9a-f]{64})?", image), (
            f"{name}: {image} is not an exact tag"
        )


def test_redis_persists_with_the_append_only_file(compose: dict[str, Any]) -> None:
    """Redis runs with AOF (fsync every second) on a named volume."""
    redis_service = compose["services"]["redis"]
    command = redis_service["command"]
    assert command[command.index("--appendonly") + 1] == "yes"
    assert command[command.index("--appendfsync") + 1] == "everysec"
    assert redis_service["volumes"] == ["redis-data:/data"]


def test_every_gencoach_process_shares_the_one_redis(compose: dict[str, Any]) -> None:
    """Controller and workers name the compose Redis; the simulator reports through it."""
    services = compose["services"]
    for name in ("controller", "worker"):
        assert services[name]["environment"]["GENCOACH_REDIS__URL"] == "redis://redis:6379/0"
    simulator = services["simulator"]["command"]
    assert simulator[simulator.index("--redis-url") + 1] == "redis://redis:6379/0"


def test_the_controller_needs_a_token_and_allows_the_agent_container(
    compose: dict[str, Any],
) -> None:
    """Without GENCOACH_API_TOKEN compose refuses to start; the token reaches the controller
    as a Docker secret read through api.token_file, never as a container variable; the
    agent's URL is allowed."""
    with pytest.raises(ValueError, match="set GENCOACH_API_TOKEN"):
        interpolate(COMPOSE_FILE.read_text(), {})
    assert compose["secrets"] == {"gencoach_api_token": {"environment": "GENCOACH_API_TOKEN"}}
    controller = compose["services"]["controller"]
    assert controller["secrets"] == ["gencoach_api_token"]
    environment = service_environment(controller, {"GENCOACH_API_TOKEN": TOKEN})
    assert environment["GENCOACH_API__TOKEN_FILE"] == "/run/secrets/gencoach_api_token"
    assert TOKEN not in environment.values()
    agent_command = compose["services"]["agent"]["command"]
    agent_url = f"http://agent:{agent_command[agent_command.index('--port') + 1]}"
    assert agent_url in json.loads(environment["GENCOACH_AGENTS"])
    simulator = compose["services"]["simulator"]["command"]
    assert simulator[simulator.index("--agent-url") + 1] == agent_url


def test_health_checks_and_the_simulator_waits_for_the_agent(compose: dict[str, Any]) -> None:
    """The controller keeps the image's check (its API); the agent checks its own /health
    and the simulator starts once it is healthy; workers and the simulator have none."""
    services = compose["services"]
    assert "healthcheck" not in services["controller"]
    agent_check = services["agent"]["healthcheck"]["test"]
    port = services["agent"]["command"][services["agent"]["command"].index("--port") + 1]
    assert agent_check == ["CMD", "gencoach", "health", "--url", f"http://127.0.0.1:{port}"]
    assert services["simulator"]["depends_on"]["agent"] == {"condition": "service_healthy"}
    assert services["simulator"]["depends_on"]["controller"] == {"condition": "service_healthy"}
    for name in ("worker", "simulator"):
        assert services[name]["healthcheck"] == {"disable": True}


def test_every_volume_is_a_named_one(compose: dict[str, Any]) -> None:
    """No anonymous volume: each mount names a volume the file declares."""
    declared = set(compose["volumes"])
    mounts = [
        str(mount) for service in compose["services"].values()
        for mount in service.get("volumes", [])
    ]  # fmt: skip
    assert mounts
    for mount in mounts:
        name, _, path = mount.partition(":")
        assert name in declared, f"{mount} is not a named volume"
        assert path.startswith("/")


def test_interpolation_follows_compose_rules() -> None:
    """`:-` replaces unset or empty, `-` only unset, `:?` fails with the message, `$$` escapes."""
    assert interpolate("${A:-x}", {"A": ""}) == "x"
    assert interpolate("${A-x}", {"A": ""}) == ""
    assert interpolate("${A-x}", {}) == "x"
    assert interpolate("$${A}", {"A": "1"}) == "${A}"
    with pytest.raises(ValueError, match="A: needed"):
        interpolate("${A:?needed}", {"A": ""})


class Deployment:
    """The compose services as local processes: names mapped to loopback ports, one Redis."""

    def __init__(self, compose: dict[str, Any], redis_url: str, folder: Path) -> None:
        self.services = compose["services"]
        self.folder = folder
        self.api_port = free_port()
        self.agent_port = free_port()
        self.redis_url = redis_url
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def _localize(self, text: str) -> str:
        secret = self.folder / "secrets" / "gencoach_api_token"
        return (
            text.replace("redis://redis:6379/0", self.redis_url)
            .replace("http://agent:8751", f"http://127.0.0.1:{self.agent_port}")
            .replace("http://127.0.0.1:8751", f"http://127.0.0.1:{self.agent_port}")
            .replace("/data/output", str(self.folder / "output"))
            .replace("/run/secrets/gencoach_api_token", str(secret))
        )

    def secrets(self) -> None:
        """Write the compose secrets as Docker would mount them, from the host's variable."""
        folder = self.folder / "secrets"
        folder.mkdir(exist_ok=True)
        (folder / "gencoach_api_token").write_text(TOKEN)

    def healthcheck(self, name: str) -> list[str]:
        """The service's health check command, localized."""
        _, *command = self.services[name]["healthcheck"]["test"]
        return [GENCOACH, *(self._localize(str(part)) for part in command[1:])]

    def command(self, name: str) -> list[str]:
        """The service's command, with the service names replaced by loopback addresses."""
        command = [self._localize(str(part)) for part in self.services[name]["command"]]
        if name == "agent":
            command[command.index("--port") + 1] = str(self.agent_port)
        return [GENCOACH, *command[1:]]

    def environment(self, name: str) -> dict[str, str]:
        """The service's variables as its container would get them, localized."""
        given = service_environment(self.services[name], {"GENCOACH_API_TOKEN": TOKEN})
        local = {key: self._localize(value) for key, value in given.items()}
        if name == "controller":
            local["GENCOACH_API__PORT"] = str(self.api_port)
        base = {key: os.environ[key] for key in ("PATH", "HOME", "LANG") if key in os.environ}
        return {**base, **local}

    def start(self, name: str) -> subprocess.Popen[bytes]:
        """Start one service's process, its output in `<name>.log`."""
        with (self.folder / f"{name}.log").open("wb") as log:
            process = subprocess.Popen(
                self.command(name),
                cwd=self.folder,
                env=self.environment(name),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.processes[name] = process
        return process

    def log(self, name: str) -> str:
        """What a service printed so far (its last lines)."""
        return (self.folder / f"{name}.log").read_text(errors="replace")[-3000:]

    def api(self, path: str) -> Any:
        """GET a controller route, as JSON."""
        response = httpx.get(f"http://127.0.0.1:{self.api_port}{path}", timeout=5)
        response.raise_for_status()
        return response.json()

    def stop(self) -> None:
        """SIGTERM every process, then kill what did not stop."""
        for process in self.processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes.values():
            if not wait_gone(process.pid, 20):
                kill_tree(process.pid)
            process.wait(timeout=10)


@pytest.fixture
def deployment(
    compose: dict[str, Any], redis_client: redis.Redis, tmp_path: Path
) -> Iterator[Deployment]:
    """The compose services, ready to start, against the test Redis (emptied)."""
    url = redis_client.connection_pool.connection_kwargs
    redis_url = f"redis://{url['host']}:{url['port']}/{url.get('db', 0)}"
    running = Deployment(compose, redis_url, tmp_path)
    try:
        yield running
    finally:
        running.stop()


def _healthy(deployment: Deployment) -> bool:
    try:
        return bool(deployment.api("/health")["status"] == "ready")
    except httpx.HTTPError:
        return False


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_the_services_run_a_coached_generation_on_one_redis(deployment: Deployment) -> None:
    """Controller, one worker, agent and simulator, as compose starts them, save a coached run."""
    deployment.secrets()
    controller = deployment.start("controller")
    wait_for(
        lambda: _healthy(deployment) or controller.poll() is not None,
        60,
        "the controller's /health",
    )
    assert controller.poll() is None, deployment.log("controller")
    deployment.start("worker")
    deployment.start("agent")
    check = deployment.healthcheck("agent")

    def agent_ready() -> bool:
        return subprocess.run(check, capture_output=True, timeout=30, check=False).returncode == 0

    wait_for(agent_ready, 60, "the agent's compose health check")
    simulator = deployment.start("simulator")
    try:
        code = simulator.wait(timeout=180)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the simulator did not finish within 180 s:\n{deployment.log('simulator')}")
    assert code == 0, deployment.log("simulator")

    runs = deployment.api("/v1/runs")["runs"]
    assert runs, deployment.log("controller")
    run_id = runs[0]["run_id"]
    requests = deployment.api(f"/v1/runs/{run_id}/requests")["requests"]
    # Only a worker's repair job turns a request into a correction.
    corrected = {"corrected", "reinjected", "executed", "proven", "unproven"}
    worked = [request for request in requests if request["state"] in corrected]
    assert worked, f"no request reached a worker: {requests}\n{deployment.log('worker')}"

    def saved() -> bool:
        configs = list((deployment.folder / "output").glob("*/config.json"))
        return any(json.loads(path.read_text())["export_complete"] for path in configs)

    wait_for(saved, 60, "the run's save under GENCOACH_OUTPUT_DIR")
