"""Reading compose.yaml as Docker Compose would: services, `${VAR:-default}` interpolation."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

COMPOSE_FILE = Path(__file__).resolve().parents[2] / "compose.yaml"
# ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:?error}, ${NAME?error}; $$ is a dollar.
_VARIABLE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}")


def load_compose() -> dict[str, Any]:
    """compose.yaml as YAML data (merge keys resolved), not yet interpolated."""
    data: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text())
    return data


def interpolate(text: str, environ: Mapping[str, str]) -> str:
    """`text` with compose's variables replaced from `environ`; ValueError for a `?` one."""

    def value(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name, operator, argument = match.groups()
        present = environ.get(name)
        empty_counts = operator is not None and operator.startswith(":")
        unset = present is None or (empty_counts and not present)
        if operator is not None and operator.endswith("?") and unset:
            raise ValueError(f"{name}: {argument}")
        if operator is not None and operator.endswith("-") and unset:
            return str(argument)
        return present or ""

    return _VARIABLE.sub(value, text)


def service_environment(service: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, str]:
    """A service's environment variables as its container sees them."""
    variables = service.get("environment") or {}
    return {name: interpolate(str(raw), environ) for name, raw in variables.items()}
