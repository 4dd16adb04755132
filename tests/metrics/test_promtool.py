"""Prometheus's own linter (`promtool check metrics`, `make test-promtool`) on a real scrape
and on every series a busy deployment has."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
import redis

from gencoach.metrics import MetricsRecorder
from gencoach.metrics import catalog as c
from gencoach.metrics.exposition import render
from gencoach.service.coaching.router import SkipCode
from tests.support.coaching import report_known
from tests.support.controller import ControllerProcess

PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is not installed: `make test-promtool` installs it"
)


def promtool_check(text: bytes) -> None:
    assert PROMTOOL is not None
    done = subprocess.run(
        [PROMTOOL, "check", "metrics"], input=text, capture_output=True, timeout=30, check=False
    )
    assert done.returncode == 0, (done.stdout + done.stderr).decode()
    assert done.stdout + done.stderr == b"", (done.stdout + done.stderr).decode()  # no lint


def test_every_family_with_every_label_value_passes_promtool() -> None:
    recorder = MetricsRecorder()
    for route in ("format", "failure", "suboptimal"):
        for code in SkipCode.__args__:  # type: ignore[attr-defined]
            recorder.inc(c.OPPORTUNITIES, route, "skipped", code)
        recorder.inc(c.OPPORTUNITIES, route, "admitted", "")
        recorder.inc(c.REQUESTS, route, "proven")
    recorder.observe(c.LLM_SECONDS, 0.7, "teacher", "ok")
    recorder.observe(c.JOB_SECONDS, 3.0, "repair")
    recorder.inc(c.LLM_TOKENS, "teacher", "prompt", by=120)
    promtool_check(render(recorder.pending()))


@pytest.mark.slow
@pytest.mark.redis
def test_a_controller_scrape_passes_promtool(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    controller = ControllerProcess(tmp_path, redis_url)
    controller.start()
    try:
        report_known(redis_url, "linted", "http://127.0.0.1:9")
        promtool_check(httpx.get(f"{controller.url}/metrics", timeout=10).content)
    finally:
        controller.stop()
