"""`gencoach status`: what it reads from `/metrics`, how it prints it, and its one line when
no controller answers."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import redis
from rich.console import Console

from gencoach.metrics import MetricsRecorder
from gencoach.metrics.catalog import EVENTS, LLM_CALLS, LLM_SECONDS, OPPORTUNITIES, REQUESTS
from gencoach.metrics.exposition import Gauge, render
from gencoach.status.command import StatusUnavailable, fetch
from gencoach.status.snapshot import parse
from gencoach.status.view import render as view
from tests.support.controller import ControllerProcess
from tests.support.processes import free_port


def exposition() -> str:
    recorder = MetricsRecorder()
    recorder.inc(EVENTS, "candidate.created", "applied", by=40)
    recorder.inc(EVENTS, "unparsed", "dead_lettered")
    for outcome, reason, count in (
        ("admitted", "", 7),
        ("skipped", "kind_not_offered", 2),
        ("refused", "pending", 1),
    ):
        recorder.inc(OPPORTUNITIES, "failure", outcome, reason, by=count)
    for state, count in (
        ("opportunity", 10), ("skipped", 3), ("admitted", 7), ("corrected", 6),
        ("reinjected", 6), ("executed", 6), ("proven", 5), ("unproven", 1), ("error", 1),
    ):  # fmt: skip
        recorder.inc(REQUESTS, "failure", state, by=count)
    recorder.inc(LLM_CALLS, "teacher", "ok", by=2)
    recorder.inc(LLM_CALLS, "teacher", "unavailable")
    recorder.observe(LLM_SECONDS, 0.2, "teacher", "ok")
    recorder.observe(LLM_SECONDS, 0.4, "teacher", "ok")
    gauges = [
        Gauge("gencoach_runs", "", ("state",), {("active",): 3, ("saved",): 9}),
        Gauge("gencoach_queue_jobs", "", ("queue",), {("gencoach-diagnosis",): 4}),
        Gauge(
            "gencoach_queue_oldest_job_age_seconds", "", ("queue",), {("gencoach-diagnosis",): 12}
        ),
        Gauge("gencoach_queue_workers", "", ("queue",), {("gencoach-diagnosis",): 2}),
    ]
    return render(recorder.pending(), gauges).decode()


def test_the_snapshot_reads_the_funnel_queues_and_backends() -> None:
    snap = parse(exposition())
    funnel = snap.funnels["failure"]
    assert (funnel.seen, funnel.admitted, funnel.skipped, funnel.refused) == (10, 7, 2, 1)
    assert (funnel.corrected, funnel.reinjected, funnel.executed) == (6, 6, 6)
    assert (funnel.proven, funnel.unproven, funnel.failed, funnel.open) == (5, 1, 1, 0)
    assert snap.skips == {("failure", "kind_not_offered"): 2}
    assert snap.events == {"applied": 40, "dead_lettered": 1}
    assert snap.runs == {"active": 3, "saved": 9}
    queue = snap.queues["gencoach-diagnosis"]
    assert (queue.waiting, queue.oldest_s, queue.workers) == (4, 12, 2)
    teacher = snap.backends["teacher"]
    assert (teacher.ok, teacher.failed) == (2, 1)
    assert teacher.mean_s == pytest.approx(0.3)


def test_the_view_prints_every_section() -> None:
    out = io.StringIO()
    Console(file=out, width=200).print(view(parse(exposition()), "http://127.0.0.1:8750"))
    text = out.getvalue()
    assert "runs        12 in all: 3 active, 9 saved" in text
    assert "40 applied, 0 duplicate, 1 dead-lettered (0 kept)" in text
    funnel = {line.split()[0]: line.split()[1:] for line in text.splitlines() if line.strip()}
    column = {stage: funnel[stage] for stage in ("seen", "admitted", "proven", "unproven", "open")}
    assert column == {
        "seen": ["10"], "admitted": ["7"], "proven": ["5"], "unproven": ["1"], "open": ["0"]
    }  # fmt: skip
    assert "kind_not_offered" in text
    assert "300 ms" in text  # the teacher's mean latency
    assert "12.0 s" in text  # the diagnosis queue's oldest job


def status(*args: str, config: Path | None = None) -> subprocess.CompletedProcess[str]:
    options = ["--config", str(config)] if config else []
    command = [sys.executable, "-m", "gencoach", *options, "status", *args]
    # Not a terminal, and no COLUMNS (pytest's own run sets one): full-width lines.
    env = {name: value for name, value in os.environ.items() if name != "COLUMNS"}
    return subprocess.run(command, capture_output=True, text=True, timeout=30, check=False, env=env)


def test_no_controller_is_one_line_and_exit_1() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    done = status("--url", url)
    assert done.returncode == 1
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"no controller answers at {url}/metrics (")
    assert line.endswith("is `gencoach serve` running with this config?")


class _NotMetrics(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<html><body>a proxy's login page</body></html>"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return None


def test_a_server_that_is_not_a_controller_is_named_in_one_line() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotMetrics)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with pytest.raises(StatusUnavailable) as caught:
            fetch(url, timeout_s=5)
    finally:
        server.shutdown()
        server.server_close()
    assert str(caught.value) == (
        f"{url}/metrics did not answer in Prometheus text (invalid metric name:<html><body>a "
        "proxy's login page</body></html>); is it a gencoach controller?"
    )


@pytest.mark.slow
@pytest.mark.redis
def test_status_reads_the_controller_its_config_names(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    controller = ControllerProcess(tmp_path, redis_url)
    controller.start()
    try:
        done = status(config=controller.config_path)
        assert done.returncode == 0, done.stderr
        assert f"controller  {controller.url}" in done.stdout
        assert "coaching    no opportunity yet" in done.stdout
        assert "gencoach-diagnosis" in done.stdout
        assert "streams     0 entries not yet handled by the controllers" in done.stdout

        watch = subprocess.Popen(
            [sys.executable, "-m", "gencoach", "status", "--url", controller.url, "--watch",
             "--interval", "0.2"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "COLUMNS": "120"},
            # as a background job of a script starts: Ctrl-C must end the watch all the same
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        )  # fmt: skip
        assert watch.stdout is not None
        frames = 0
        for line in watch.stdout:  # bounded by the test's timeout
            frames += "Ctrl-C ends" in line
            if frames == 2:
                break
        watch.send_signal(signal.SIGINT)
        _, err = watch.communicate(timeout=15)
        assert watch.returncode == 0, err
        assert "Traceback" not in err
    finally:
        controller.stop()
