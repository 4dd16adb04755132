"""magma-core's shipped `default_config.yaml`, read by `gencoach config check`."""

from __future__ import annotations

import re
import subprocess
from importlib.resources import files
from pathlib import Path

import pytest
import yaml
from magma_core.configs.config import MAGMAConfig

MAGMA_SECTIONS = [
    "benchmark", "generate", "magma_agent_address", "magma_agent_timeout", "magma_planner_address",
]  # fmt: skip


def _shipped() -> str:
    return files("magma_core.configs").joinpath("default_config.yaml").read_text()


def _with_backend_example(text: str) -> str:
    """The shipped file with its commented backend example uncommented, as a user would."""
    lines, out, inside = text.splitlines(), [], False
    for line in lines:
        if line.startswith("backends: {}"):
            out.append("backends:")
            continue
        if line.startswith("  # default_ollama:"):
            inside = True
        if inside and line.startswith("  #"):
            uncommented = line.replace("  # ", "  ", 1)
            if not uncommented.strip().startswith("#"):
                out.append(uncommented)
            continue
        inside = False
        out.append(line)
    return "\n".join(out) + "\n"


def _check(gencoach: Path, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(gencoach), "config", "check", "--config", str(path)],
        capture_output=True, text=True, timeout=60, check=False, cwd=path.parent,
    )  # fmt: skip


def _notices(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "magma_sections_ignored" in line]


def test_the_shipped_magma_config_with_its_backend_example_loads(
    gencoach_bin: Path, tmp_path: Path
) -> None:
    """Uncommented, the example backend loads as MAGMA loads it (its null Authorization
    dropped, Content-type shown), MAGMA's own sections ignored with one notice naming them."""
    path = tmp_path / "magma.yaml"
    path.write_text(_with_backend_example(_shipped()))
    magma = MAGMAConfig.load(path).backends["default_ollama"]
    result = _check(gencoach_bin, path)
    assert result.returncode == 0, result.stderr
    (notice,) = _notices(result.stderr)
    assert re.findall(r"\"(\w+)\"", notice.split("[", 1)[1].split("]", 1)[0]) == MAGMA_SECTIONS
    effective = yaml.safe_load(result.stdout)
    backend = effective["backends"]["default_ollama"]
    assert (backend["endpoint"], backend["default_model"]) == (magma.endpoint, magma.default_model)
    assert (backend["timeout_s"], backend["max_retries"]) == (magma.timeout, magma.max_retry)
    assert magma.headers["Authorization"] is None  # MAGMA's "no such header"
    assert backend["headers"] == {"Content-type": "application/json"}
    assert effective["coaching"]["enabled"] is True
    assert (
        effective["coaching"]["max_pending_per_stage"]
        == MAGMAConfig.load(path).coaching.max_pending_per_stage
    )


def test_the_shipped_magma_config_alone_asks_for_a_backend_as_magma_does(
    gencoach_bin: Path, tmp_path: Path
) -> None:
    """As shipped (coaching on, no backend) the one problem is the missing backend, which
    MAGMA's own `verify()` refuses too."""
    path = tmp_path / "magma.yaml"
    path.write_text(_shipped())
    with pytest.raises(ValueError, match="no backend"):
        MAGMAConfig.load(path).verify()
    result = _check(gencoach_bin, path)
    assert result.returncode == 2
    problems = [line for line in result.stderr.splitlines() if line.startswith("  - ")]
    assert problems == [
        "  - coaching.enabled: coaching is enabled but no backend is configured under "
        "`backends` (got True)"
    ]
