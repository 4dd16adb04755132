"""Finding and reading the YAML config file."""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml

from gencoach.config.redaction import is_secret_key, scrub
from gencoach.errors import ConfigError, ConfigProblem

DEFAULT_CONFIG_FILE = Path("gencoach.yaml")
_FILE = "config file"
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key given twice in a mapping is an error."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, Hashable) and key in seen:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping",
                    node.start_mark,
                    f"found the key {key!r} twice",
                    key_node.start_mark,
                )
            if isinstance(key, Hashable):
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


def find_config_file(path: Path | None) -> Path | None:
    """The file to read: `path`, which must exist, or ./gencoach.yaml if there is one."""
    if path is None:
        return DEFAULT_CONFIG_FILE if DEFAULT_CONFIG_FILE.is_file() else None
    if not path.exists():
        raise ConfigError([ConfigProblem(_FILE, "does not exist", str(path), True)], str(path))
    return path


def read_config_file(path: Path) -> dict[str, Any]:
    """The settings mapping in the YAML file at `path` (empty for an empty file)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
        raise ConfigError(
            [ConfigProblem(_FILE, f"cannot be read: {reason}", str(path), True)], str(path)
        ) from exc
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as exc:
        raise ConfigError([_syntax_problem(exc, text)], str(path)) from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        problem = ConfigProblem(
            "(top level)",
            f"must be a mapping of settings, not a {type(data).__name__}",
            scrub(data),
            True,
        )
        raise ConfigError([problem], str(path))
    return data


def _syntax_problem(exc: yaml.YAMLError, text: str) -> ConfigProblem:
    """The YAML error located by line and column, with the line unless it may hold a secret."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    message = f"invalid YAML: {problem}" + (f" ({context})" if context else "")
    if mark is None:
        return ConfigProblem(_FILE, message)
    lines = text.splitlines()
    where = f"line {mark.line + 1}, column {mark.column + 1}"
    if mark.line >= len(lines) or _under_secret(lines, mark.line):
        return ConfigProblem(where, message)
    return ConfigProblem(where, message, lines[mark.line].strip(), True)


def _under_secret(lines: list[str], index: int) -> bool:
    """Whether line `index` or a line it is nested under names a secret key."""
    indent = len(lines[index]) + 1
    for line in reversed(lines[: index + 1]):
        stripped = line.lstrip(" -")
        if not stripped or stripped.startswith("#"):
            continue
        depth = len(line) - len(stripped)
        if depth < indent:
            indent = depth
            key = stripped.partition(":")[0].strip().strip("'\"")
            if is_secret_key(key) or is_secret_key(stripped):
                return True
    return False
