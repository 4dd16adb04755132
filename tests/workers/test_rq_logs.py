"""RQ's own log lines reach gencoach's logs as plain text."""

from __future__ import annotations

import logging

from structlog.testing import capture_logs

from gencoach.workers.pool import RQLogHandler


def test_rq_colours_are_stripped_from_its_messages() -> None:
    """A coloured `Job OK` from RQ is logged as `rq.log` with no escape codes left."""
    record = logging.LogRecord(
        "rq.worker", logging.INFO, __file__, 1, "%s: \x1b[32mJob OK\x1b[39;49;00m (%s)",
        ("gencoach-repair", "job-1"), None,
    )  # fmt: skip
    with capture_logs() as logs:
        RQLogHandler().emit(record)
    assert logs == [
        {
            "component": "rq",
            "event": "rq.log",
            "log_level": "info",
            "logger": "rq.worker",
            "msg": "gencoach-repair: Job OK (job-1)",
        }
    ]
