"""Chaos: bounded load while the controller and the workers are SIGKILLed at random
points, Redis is restarted once, and every client connection and the script cache are
dropped. The controller never exits on its own, every run that kept its Redis state is
saved once in its own folder, every request ends with a reason, no stage passes its
limits and no slot stays pending."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from gencoach.constants import Keys
from tests.chaos.load import LoadReport, start_generators
from tests.support.agent_server import ScriptedAgent
from tests.support.coaching import coaching_settings
from tests.support.controller import ControllerProcess, wait_for
from tests.support.llm_server import ScriptedLLMServer, delayed, json_reply, scripted_llm_servers
from tests.support.processes import kill_tree
from tests.support.restartable_redis import RestartableRedis

pytestmark = [pytest.mark.slow, pytest.mark.chaos, pytest.mark.timeout(300)]

TERMINAL = {"skipped", "declined", "abandoned", "error", "proven", "unproven"}
DIAGNOSIS = {"decision_index": 2, "reason": "sw9 is not in the task", "expected_decision": "sw4"}
MAX_PENDING, MAX_UNPROVEN = 1, 2


@pytest.fixture
def slow_llm() -> Iterator[ScriptedLLMServer]:
    """An LLM answering every diagnosis after one to three seconds."""
    with scripted_llm_servers() as start:
        server = start(delayed(1.0, json_reply(DIAGNOSIS)))
        server.script(*[delayed(random.uniform(1.0, 3.0), json_reply(DIAGNOSIS))] * 200)
        yield server


class Chaos:
    """The system under test and what was done to it."""

    def __init__(self, folder: Path, llm: ScriptedLLMServer) -> None:
        self.redis = RestartableRedis(folder / "redis")
        self.redis.start()
        settings = coaching_settings(llm)
        settings["coaching"]["max_pending_per_stage"] = MAX_PENDING
        settings["coaching"]["max_unproven_per_stage"] = MAX_UNPROVEN
        settings["coaching"]["lease_s"] = 10
        self.controller = ControllerProcess(
            folder, self.redis.url, settings=settings, claim_idle_s=2, housekeeping_s=2
        )
        self.kills: Counter[str] = Counter()
        self.controllers_started = 0
        self.violations: list[str] = []
        self.most: Counter[str] = Counter()
        self._watching = threading.Event()

    def start(self) -> None:
        """Start the controller (checking the previous one did not exit on its own)."""
        self.controller.start(timeout_s=30)
        self.controllers_started += 1

    def assert_controller_alive(self) -> None:
        """The controller process is still the one we started, running."""
        process = self.controller.process
        assert process is not None
        code = process.poll()
        assert code is None, (
            f"the controller exited on its own ({code}):\n" + (self.controller.log_text()[-4000:])
        )

    def kill_controller(self) -> None:
        """SIGKILL the controller and start a new one."""
        self.assert_controller_alive()
        assert self.controller.process is not None
        self.controller.process.kill()
        self.controller.process.wait(10)
        self.kills["controller"] += 1
        self.start()

    def kill_workers(self) -> None:
        """SIGKILL every worker process and start a new pool."""
        for worker in self.controller.workers:
            if worker.poll() is None:
                kill_tree(worker.pid)
                worker.wait(10)
        self.controller.workers.clear()
        self.kills["workers"] += 1
        self.controller.start_workers()

    def drop_connections(self) -> None:
        """`CLIENT KILL TYPE normal` and `SCRIPT FLUSH`."""
        client = redis.Redis.from_url(self.redis.url)
        client.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        client.script_flush()
        client.close()
        self.kills["connections"] += 1

    def restart_redis(self) -> None:
        """Restart Redis empty under the running controller."""
        self.redis.restart()
        self.kills["redis"] += 1

    def watch_limits(self, runs: LoadReport) -> threading.Thread:
        """Sample every run's stages until `stop_watching`, recording any limit passed."""

        def watch() -> None:
            while not self._watching.is_set():
                for run_id in list(runs.started):
                    try:
                        response = httpx.get(f"{self.controller.url}/v1/runs/{run_id}/stages")
                    except httpx.HTTPError:
                        continue
                    if response.status_code != 200:
                        continue
                    for stage in response.json()["stages"]:
                        self.most["pending"] = max(self.most["pending"], stage["pending"])
                        self.most["unproven"] = max(self.most["unproven"], stage["unproven"])
                        if stage["pending"] > MAX_PENDING or stage["unproven"] > MAX_UNPROVEN:
                            self.violations.append(f"{run_id}: {stage}")
                time.sleep(0.3)

        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        return thread

    def stop_watching(self) -> None:
        """End the limits sampling."""
        self._watching.set()

    def stop(self) -> None:
        """Kill everything that is left."""
        self.controller.stop()
        self.redis.kill()


def _pace(seconds: float, chaos: Chaos) -> None:
    """Sleep while checking that the controller stays up."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        chaos.assert_controller_alive()
        time.sleep(0.2)


def _join(threads: list[threading.Thread], chaos: Chaos, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    for thread in threads:
        while thread.is_alive() and time.monotonic() < deadline:
            chaos.assert_controller_alive()
            thread.join(0.2)
    assert not any(thread.is_alive() for thread in threads), "generators still running"


def _requests(chaos: Chaos, run_id: str) -> list[dict[str, Any]]:
    response = httpx.get(f"{chaos.controller.url}/v1/runs/{run_id}/requests", timeout=10)
    return list(response.json()["requests"]) if response.status_code == 200 else []


def test_the_system_survives_kills_restarts_and_dropped_connections(
    tmp_path: Path, scripted_agent: ScriptedAgent, slow_llm: ScriptedLLMServer
) -> None:
    """Two waves of runs through kills of every process, a Redis restart and dropped clients."""
    rng = random.Random(12)
    chaos = Chaos(tmp_path, slow_llm)
    try:
        chaos.start()
        chaos.controller.start_workers()
        first, second = LoadReport(), LoadReport()
        chaos.watch_limits(first)
        wave = start_generators(
            [f"a{i}" for i in range(10)], chaos.redis.url, scripted_agent.url, first, 6.0
        )
        for action in rng.sample(
            [chaos.kill_workers, chaos.drop_connections, chaos.kill_controller], 3
        ):
            _pace(rng.uniform(1.0, 3.0), chaos)
            action()
        _join(wave, chaos, 120)

        chaos.restart_redis()  # the first wave's unsaved state is lost here, by design
        _pace(3.0, chaos)

        chaos.watch_limits(second)
        wave = start_generators(
            [f"b{i}" for i in range(24)], chaos.redis.url, scripted_agent.url, second, 12.0
        )
        for action in rng.sample(
            [chaos.kill_workers, chaos.drop_connections, chaos.kill_controller,
             chaos.kill_workers, chaos.kill_controller], 5
        ):  # fmt: skip
            _pace(rng.uniform(0.5, 3.0), chaos)
            action()
        _join(wave, chaos, 150)

        client = redis.Redis.from_url(chaos.redis.url)
        keys = Keys()
        survivors = sorted(second.finished)
        wait_for(
            lambda: all(client.hget(keys.run(r, "meta"), "state") == b"saved" for r in survivors),
            timeout_s=60,
            what="every run of the second wave saved",
        )
        wait_for(
            lambda: all(
                r["state"] in TERMINAL and r["reason"]
                for run_id in survivors
                for r in _requests(chaos, run_id)
            ),
            timeout_s=60,
            what="every request terminal with a reason",
        )
        chaos.stop_watching()
        chaos.assert_controller_alive()

        folders: dict[str, list[Path]] = {}
        for folder in chaos.controller.output_dir.iterdir():
            config = json.loads((folder / "config.json").read_text())
            assert config["export_complete"] is True, folder
            folders.setdefault(config["run_id"], []).append(folder)
        assert all(len(found) == 1 for found in folders.values()), folders
        assert set(survivors) <= set(folders)
        states: Counter[str] = Counter()
        reasons: Counter[str] = Counter()
        for run_id in survivors:
            for request in _requests(chaos, run_id):
                states[request["state"]] += 1
                reasons[f"{request['state']}: {request['reason'][:70]}"] += 1
            stages = httpx.get(f"{chaos.controller.url}/v1/runs/{run_id}/stages").json()
            assert all(stage["pending"] == 0 for stage in stages["stages"]), (run_id, stages)
        assert chaos.violations == []
        client.close()
        print(
            "\nchaos:",
            f"kills={dict(chaos.kills)}",
            f"controllers_started={chaos.controllers_started}",
            f"runs_started={len(first.started) + len(second.started)}",
            f"runs_saved_after_restart={len(survivors)}",
            f"folders={len(folders)}",
            f"branches_executed={first.branches_executed + second.branches_executed}",
            f"requests={dict(states)}",
            f"most_pending={chaos.most['pending']} most_unproven={chaos.most['unproven']}",
            f"generator_errors={first.errors + second.errors}",
            "\nreasons:",
            json.dumps(reasons.most_common(), indent=1),
        )
        assert len(survivors) >= 20, second.errors
    finally:
        chaos.stop()
