"""CLI start-up: wall time of quick `gencoach` commands, and of a real `gencoach save`,
against pip, bare Python and typer.

    .venv/bin/python -m benchmarks.startup [--repeat 7]

Each command runs as a fresh process `--repeat` times, the commands interleaved round by
round so that load from other work falls on all of them alike; the best and median times
are printed beside three baselines measured in the same run: `python -m pip --version`
(the aim: `gencoach --version` within twice its time), an empty `python -c pass` and
`python -c "import typer"` (the least any typer CLI pays).

`gencoach save` writes a small run (the known run of the tests, not finished) again each
time, from a controller started for the benchmark on an embedded Redis of its own.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks.common import bench_redis
from gencoach.reporting.client import Reporter
from tests.support.controller import ControllerProcess, wait_for
from tests.support.graphs import known_run_events

GENCOACH = str(Path(sys.executable).parent / "gencoach")
PIP = "python -m pip --version (baseline)"
TYPER = "python -c 'import typer' (baseline)"
RUN_ID = "bench-save"
QUICK: dict[str, list[str]] = {
    PIP: [sys.executable, "-m", "pip", "--version"],
    "python -c pass (baseline)": [sys.executable, "-c", "pass"],
    TYPER: [sys.executable, "-c", "import typer"],
    "gencoach --version": [GENCOACH, "--version"],
    "gencoach --help": [GENCOACH, "--help"],
    "gencoach config check": [GENCOACH, "config", "check"],
    "gencoach health (nothing listening)": [GENCOACH, "health", "--timeout", "0.2"],
    "gencoach save --help": [GENCOACH, "save", "--help"],
}


def timed(command: list[str], folder: str) -> float:
    """Wall time of one run of `command`, in seconds (it must succeed)."""
    environment = {"PATH": "/usr/bin:/bin", "GENCOACH_API__PORT": "1"}
    started = time.perf_counter()
    done = subprocess.run(command, cwd=folder, env=environment, capture_output=True, check=False)
    elapsed = time.perf_counter() - started
    quiet = command[1:3] == ["health", "--timeout"]  # nothing listens: exits 1 by design
    if done.returncode and not quiet:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr.decode(errors='replace')}")
    return elapsed


def _saved_run(folder: Path, redis_url: str) -> ControllerProcess:
    """A controller on `redis_url` holding the known run (not finished) in its graph."""
    controller = ControllerProcess(folder, redis_url, settings={"log": {"level": "warning"}})
    controller.start()
    with Reporter(RUN_ID, redis_url=redis_url) as reporter:
        for kind, fields in known_run_events()[:-1]:
            reporter.emit(kind, **fields)
    wait_for(
        lambda: httpx.get(f"{controller.url}/v1/runs/{RUN_ID}").json().get("executions") == 8,
        timeout_s=60,
        what="the run's events applied",
    )
    return controller


def main() -> None:
    """Print one table row per command: best, median, and the median over pip's and typer's."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with (
        bench_redis(None) as redis_url,
        tempfile.TemporaryDirectory() as folder,
    ):
        controller = _saved_run(Path(folder), redis_url)
        commands = {
            **QUICK,
            "gencoach save (a small run)": [
                GENCOACH, "--config", str(controller.config_path), "save", RUN_ID,
            ],
        }  # fmt: skip
        results: dict[str, list[float]] = {name: [] for name in commands}
        try:
            for _ in range(args.repeat):
                for name, command in commands.items():
                    results[name].append(timed(command, folder))
        finally:
            controller.stop()
    pip_median = statistics.median(results[PIP])
    typer_median = statistics.median(results[TYPER])
    print("| command | best | median | median / pip --version | median / typer import |")
    print("|---|---|---|---|---|")
    for name, times in results.items():
        median = statistics.median(times)
        print(f"| {name} | {min(times):.2f} s | {median:.2f} s | {median / pip_median:.1f} "
              f"| {median / typer_median:.1f} |")  # fmt: skip


if __name__ == "__main__":
    main()
