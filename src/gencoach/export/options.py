"""Exporter options: the `--options` file, read strictly, each key checked by name."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

from pydantic import JsonValue

from gencoach.errors import ExportError

JsonObject = dict[str, JsonValue]


def load_options(path: Path | None) -> JsonObject:
    """The options object of a JSON file; no file means no options."""
    if path is None:
        return {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ExportError(f"options file {path} cannot be read: {error}") from None
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except ValueError as error:
        raise ExportError(f"options file {path} is not valid JSON: {error}") from None
    if not isinstance(value, dict):
        kind = _json_kind(value)
        raise ExportError(f"options file {path} must hold a JSON object, not {kind}")
    return value


def _refuse_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"


class Options:
    """Typed reads of one format's options; `finish` refuses the keys nobody read."""

    def __init__(self, values: Mapping[str, JsonValue], format_name: str) -> None:
        self._values = dict(values)
        self._format = format_name
        self._read: set[str] = set()

    def _get(self, key: str) -> JsonValue:
        self._read.add(key)
        return self._values.get(key)

    def _refuse(self, key: str, expected: str) -> ExportError:
        got = json.dumps(self._values[key])
        return ExportError(
            f"option {key!r} of format {self._format!r} must be {expected}, got {got}"
        )

    def raw(self, key: str) -> JsonValue:
        """An option as given (None when absent), for a caller that checks it itself."""
        return self._get(key)

    def flag(self, key: str, default: bool) -> bool:
        """A boolean option."""
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self._refuse(key, "true or false")
        return value

    def text(self, key: str, default: str) -> str:
        """A string option."""
        value = self.optional_text(key)
        return default if value is None else value

    def optional_text(self, key: str) -> str | None:
        """A string option, None when absent."""
        value = self._get(key)
        if value is not None and not isinstance(value, str):
            raise self._refuse(key, "a string")
        return value

    def number(self, key: str, minimum: float) -> float | None:
        """An optional finite number, at least `minimum`."""
        value = self._get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._refuse(key, f"a number of at least {minimum:g}")
        number = float(value)
        if not math.isfinite(number) or number < minimum:
            raise self._refuse(key, f"a number of at least {minimum:g}")
        return number

    def count(self, key: str, minimum: int) -> int | None:
        """An optional integer, at least `minimum`."""
        value = self._get(key)
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise self._refuse(key, f"an integer of at least {minimum}")
        return value

    def finish(self) -> None:
        """Refuse any key that no read asked for: a typo must not pass silently."""
        unknown = sorted(set(self._values) - self._read)
        if unknown:
            known = ", ".join(sorted(self._read)) or "none"
            names = ", ".join(repr(key) for key in unknown)
            raise ExportError(
                f"unknown option {names} for format {self._format!r}; known options: {known}"
            )
