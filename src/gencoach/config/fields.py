"""Value types of the settings: each refuses bad input with a message that says what it wants.

Numbers arrive as ints or floats from YAML and as strings from the environment; both are
accepted, but a bool is never a number here (YAML turns `yes` into True).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated

from pydantic import PlainValidator
from pydantic_core import PydanticCustomError

from gencoach.config.urls import http_url_problem, redis_url_problem

_INTEGER = re.compile(r"[+-]?\d+")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _integer(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _INTEGER.fullmatch(value.strip()):
        return int(value)
    return None


def _count(value: object) -> int:
    number = _integer(value)
    if number is None or number < 1:
        raise PydanticCustomError("positive_int", "must be a positive integer")
    return number


MAX_BUDGET = 1_000_000
"""The largest coaching budget: far beyond any stage's use, exact in Redis's Lua numbers."""


def _budget(value: object) -> int:
    number = _integer(value)
    if number is None or not 1 <= number <= MAX_BUDGET:
        raise PydanticCustomError("budget", f"must be an integer from 1 to {MAX_BUDGET}")
    return number


def _retries(value: object) -> int:
    number = _integer(value)
    if number is None or number < 0:
        raise PydanticCustomError("non_negative_int", "must be an integer, 0 or more")
    return number


def _port(value: object) -> int:
    number = _integer(value)
    if number is None or not 1 <= number <= 65535:
        raise PydanticCustomError("port", "must be a TCP port, 1 to 65535")
    return number


def _seconds(value: object) -> float:
    number: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            number = None
    if number is None or not math.isfinite(number) or number <= 0:
        raise PydanticCustomError("positive_seconds", "must be a positive number of seconds")
    return number


def _text(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise PydanticCustomError("non_empty_text", "must be a non-empty string")
    return value


def _path(value: object) -> Path:
    if isinstance(value, Path):
        return value
    return Path(_text(value))


def _env_name(value: object) -> str:
    if not isinstance(value, str) or not _ENV_NAME.fullmatch(value):
        raise PydanticCustomError("env_name", "must be the name of an environment variable")
    return value


def _redis_url(value: object) -> str:
    problem = redis_url_problem(_text(value))
    if problem:
        raise PydanticCustomError("redis_url", problem)
    return str(value)


def _agent_prefix(value: object) -> str:
    problem = http_url_problem(_text(value), prefix=True)
    if problem:
        raise PydanticCustomError("agent_url", problem)
    return str(value)


Count = Annotated[int, PlainValidator(_count)]
"""A positive integer limit: 1 or more; a bool, 0, a negative or a float is refused."""
Budget = Annotated[int, PlainValidator(_budget)]
"""A coaching budget: 1 to MAX_BUDGET."""
Retries = Annotated[int, PlainValidator(_retries)]
"""How many times to try again after a first failure: 0 or more."""
Port = Annotated[int, PlainValidator(_port)]
Seconds = Annotated[float, PlainValidator(_seconds)]
"""A positive, finite duration in seconds."""
Text = Annotated[str, PlainValidator(_text)]
FilePath = Annotated[Path, PlainValidator(_path)]
EnvName = Annotated[str, PlainValidator(_env_name)]
RedisUrl = Annotated[str, PlainValidator(_redis_url)]
"""'embedded', or a redis://, rediss:// or unix:// URL."""
AgentPrefix = Annotated[str, PlainValidator(_agent_prefix)]
"""An http(s) URL prefix naming the agents a run may use."""
