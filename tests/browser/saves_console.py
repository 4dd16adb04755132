"""`gencoach console --saves` as a process on a free loopback port, for the browser tests."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.processes import answers_200, free_port, kill_tree, wait_started


@contextmanager
def saves_console_at(saves: Path, log: Path) -> Iterator[str]:
    """Serve the saves at or below `saves` (output in `log`); yields the console's URL."""
    port = free_port()
    command = [sys.executable, "-m", "gencoach", "console", "--saves", str(saves),
               "--port", str(port)]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        ready = url + "/console/api/session"
        wait_started(lambda: answers_200(ready), process, log, "the saves console")
        yield url
    finally:
        kill_tree(process.pid)
        process.wait(10)
