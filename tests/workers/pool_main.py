"""Run `run_workers` from a JSON settings file, as `gencoach worker` does (for the pool tests).

python -m tests.workers.pool_main SETTINGS REDIS_URL --processes N [--burst]
    [--mode async|fork] [--concurrency C] QUEUE...
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gencoach.config.settings import Settings
from gencoach.runtime.logs import configure_logging
from gencoach.workers.pool import run_workers


def main(argv: list[str]) -> int:
    """Parse the arguments, configure logging and run the pool; its exit status."""
    parser = argparse.ArgumentParser()
    parser.add_argument("settings", type=Path)
    parser.add_argument("redis_url")
    parser.add_argument("queues", nargs="+")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--burst", action="store_true")
    parser.add_argument("--mode", choices=["async", "fork"], default=None)
    parser.add_argument("--concurrency", type=int, default=None)
    options = parser.parse_args(argv)
    settings = Settings.model_validate(json.loads(options.settings.read_text()))
    configure_logging(settings.log.level, settings.log.format)
    return run_workers(
        settings,
        options.redis_url,
        processes=options.processes,
        queues=options.queues,
        burst=options.burst,
        mode=options.mode,
        concurrency=options.concurrency,
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
