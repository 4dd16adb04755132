"""CLI start-up: wall time of quick `gencoach` commands against bare Python and typer.

    .venv/bin/python -m benchmarks.startup [--repeat 7]

Each command runs as a fresh process `--repeat` times; the best and median times are
printed beside two baselines measured in the same run: an empty `python -c pass` and
`python -c "import typer"` (the least any typer CLI pays).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GENCOACH = str(Path(sys.executable).parent / "gencoach")
COMMANDS: dict[str, list[str]] = {
    "python -c pass (baseline)": [sys.executable, "-c", "pass"],
    "python -c 'import typer' (baseline)": [sys.executable, "-c", "import typer"],
    "gencoach --version": [GENCOACH, "--version"],
    "gencoach --help": [GENCOACH, "--help"],
    "gencoach config check": [GENCOACH, "config", "check"],
    "gencoach health (nothing listening)": [GENCOACH, "health", "--timeout", "0.2"],
}


def timed(command: list[str], repeat: int, folder: str) -> list[float]:
    """Wall times of `repeat` runs of `command`, in seconds."""
    times = []
    environment = {"PATH": "/usr/bin:/bin", "GENCOACH_API__PORT": "1"}
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(command, cwd=folder, env=environment, capture_output=True, check=False)
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    """Print one table row per command: best, median, and the median over typer's."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        results = {name: timed(command, args.repeat, folder) for name, command in COMMANDS.items()}
    typer_median = statistics.median(results["python -c 'import typer' (baseline)"])
    print("| command | best | median | median / typer import |")
    print("|---|---|---|---|")
    for name, times in results.items():
        median = statistics.median(times)
        print(f"| {name} | {min(times):.2f} s | {median:.2f} s | {median / typer_median:.1f} |")


if __name__ == "__main__":
    main()
