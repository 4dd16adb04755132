"""Settings from `GENCOACH_*` environment variables, nested with `__`, laid over the file's.

`GENCOACH_COACHING__MAX_PENDING_PER_STAGE=3` sets `coaching.max_pending_per_stage` to
"3"; a value that starts with `{` or `[` is decoded as JSON, so
`GENCOACH_AGENTS='["http://x"]'` sets a list. Variable names are matched to the file's keys
without regard to case. Unknown variables are left in place for validation to refuse.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from gencoach.config.redaction import is_secret_key, scrub
from gencoach.errors import ConfigProblem

ENV_PREFIX = "GENCOACH_"
ENV_NESTED_DELIMITER = "__"
CONFIG_ENV_VAR = "GENCOACH_CONFIG"
"""Reserved for the CLI (the config file's path); never read as a setting."""

KeyPath = tuple[str, ...]


@dataclass
class Overlay:
    """The file's settings with the environment laid over them, and where each came from."""

    data: dict[str, Any]
    origins: dict[KeyPath, str] = field(default_factory=dict)
    problems: list[ConfigProblem] = field(default_factory=list)

    def variables_at(self, path: tuple[str | int, ...]) -> list[str]:
        """The variables that set `path`, a key above it or a key below it."""
        keys = tuple(str(part) for part in path)
        return [
            name
            for origin, name in self.origins.items()
            if origin[: len(keys)] == keys or keys[: len(origin)] == origin
        ]


def overlay_environment(
    data: Mapping[str, Any], environ: Mapping[str, str], ignore: Collection[str] = ()
) -> Overlay:
    """Lay the `GENCOACH_*` variables of `environ`, except `ignore`d ones, over `data`."""
    overlay = Overlay(copy.deepcopy(dict(data)))
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX) or name == CONFIG_ENV_VAR or name in ignore:
            continue
        keys = name[len(ENV_PREFIX) :].lower().split(ENV_NESTED_DELIMITER)
        if not all(keys):
            overlay.problems.append(ConfigProblem(name, "is not the name of a setting"))
            continue
        value = _decode(name, environ[name], keys, overlay)
        if value is not _UNDECODABLE:
            _put(overlay, name, keys, value)
    return overlay


_UNDECODABLE = object()


def _decode(name: str, raw: str, keys: list[str], overlay: Overlay) -> Any:
    if not raw.lstrip().startswith(("{", "[")):
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        secret = any(is_secret_key(key) for key in keys)
        overlay.problems.append(
            ConfigProblem(
                f"{'.'.join(keys)} ({name})",
                f"looks like JSON but does not parse: {exc.msg} at character {exc.pos}",
                value=None if secret else scrub(raw),
                has_value=not secret,
            )
        )
        return _UNDECODABLE


def _put(overlay: Overlay, name: str, keys: list[str], value: Any) -> None:
    """Set `value` at `keys`, matching existing keys without case; merge JSON objects."""
    node = overlay.data
    path: list[str] = []
    for index, key in enumerate(keys):
        key = next((k for k in node if isinstance(k, str) and k.lower() == key), key)
        path.append(key)
        if index == len(keys) - 1:
            if isinstance(value, dict) and isinstance(node.get(key), dict):
                _merge(node[key], value)
            else:
                node[key] = value
            break
        if not isinstance(node.get(key), dict):
            setter = overlay.origins.get(tuple(path))
            if setter is not None:
                overlay.problems.append(
                    ConfigProblem(name, f"sets a key inside {'.'.join(path)}, which {setter} sets")
                )
                return
            node[key] = {}  # the environment wins over whatever the file held here
        node = node[key]
    overlay.origins[tuple(path)] = name


def _merge(base: dict[str, Any], override: Mapping[str, Any]) -> None:
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value
