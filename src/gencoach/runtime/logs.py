"""Structured logging: JSON lines for machines, a readable console for people, no secrets."""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Literal, TextIO

import structlog
from pydantic import SecretStr

from gencoach.config.scrubbing import scrub_value

LogFormat = Literal["auto", "json", "console"]

REDACTED = "**********"

# Field names whose values are credentials wherever they appear in an event: a whole
# word of the name, so `access_token` is one but `prompt_tokens` is not.
_SECRET_KEY = re.compile(
    r"(?:^|[_-])(?:authorization|api[_-]?key|apikey|token|password|secret|cookie)(?:$|[_-])", re.I
)
# A URL's user-info password: found from its `://`, so a long run of letters before it
# is never rescanned from every position (each scan ends at the next `/`: linear time).
_URL_PASSWORD = re.compile(r"(?<=[a-z0-9+.-])://(?P<user>[^:/@\s]*):[^@/\s]+@", re.I)
# Log fields are cut to this many characters before anything else looks at them: an
# answer or an error quoting megabytes of foreign text costs no more than this to log.
MAX_FIELD_CHARS = 4096


def redact(value: Any, key: str = "") -> Any:
    """Return `value` with credentials replaced, looking into mappings and sequences."""
    if isinstance(value, SecretStr):
        return REDACTED
    if key and _SECRET_KEY.search(key) and value is not None and not isinstance(value, bool):
        return REDACTED
    if isinstance(value, Mapping):
        if key.lower() == "headers":
            return {name: REDACTED for name in value}
        return {name: redact(item, str(name)) for name, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    if isinstance(value, str):
        return _URL_PASSWORD.sub(r"://\g<user>:" + REDACTED + "@", value)
    return value


def cap(value: Any, *, tail: bool = False) -> Any:
    """`value` with every string in it cut to MAX_FIELD_CHARS, noting the original length.

    A string keeps its start, or with `tail` its end (a traceback's last lines name the
    error).
    """
    if isinstance(value, str):
        if len(value) <= MAX_FIELD_CHARS:
            return value
        note = f"[cut: {len(value)} characters in all]"
        if tail:
            return f"{note} …{value[-MAX_FIELD_CHARS:]}"
        return f"{value[:MAX_FIELD_CHARS]}… {note}"
    if isinstance(value, Mapping):
        return {name: cap(item, tail=tail) for name, item in value.items()}
    if isinstance(value, list | tuple):
        return [cap(item, tail=tail) for item in value]
    return value


def _redact_event(_: Any, __: str, event_dict: structlog.typing.EventDict) -> Any:
    return {
        key: scrub_value(redact(cap(value, tail=key == "exception"), key))
        for key, value in event_dict.items()
    }


def configure_logging(
    level: str = "info", fmt: LogFormat = "auto", stream: TextIO | None = None
) -> None:
    """Route structlog events to `stream` (stderr) as JSON lines, or for a TTY as console."""
    out = stream if stream is not None else sys.stderr
    use_console = fmt == "console" or (fmt == "auto" and out.isatty())
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer(colors=out.isatty())
        if use_console
        else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            _redact_event,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_level_number(level)),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=False,
    )


def _level_number(level: str) -> int:
    number = logging.getLevelNamesMapping().get(level.upper())
    if number is None:
        raise ValueError(f"unknown log level {level!r}")
    return number


@contextmanager
def bound(**ids: str | int | None) -> Iterator[None]:
    """Bind ids such as `run_id` and `request_id` to every event logged inside the block."""
    present = {key: value for key, value in ids.items() if value is not None}
    with structlog.contextvars.bound_contextvars(**present):
        yield


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    """A logger whose events carry `component=name`."""
    logger: structlog.typing.FilteringBoundLogger = structlog.get_logger(component=name)
    return logger
