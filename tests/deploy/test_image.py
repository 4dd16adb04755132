"""The image's files, read without a Docker engine: a pinned base image, the runtime
dependencies pinned to the tested versions, no anonymous volume, and a build context
that carries only what the Dockerfile copies."""

from __future__ import annotations

import re
import runpy
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
runtime_closure = runpy.run_path(str(ROOT / "scripts" / "constraints.py"))["runtime_closure"]

DOCKERFILE = (ROOT / "Dockerfile").read_text()
INSTRUCTIONS = [
    line.strip() for line in DOCKERFILE.replace("\\\n", " ").splitlines()
    if line.strip() and not line.lstrip().startswith("#")
]  # fmt: skip


def _pins() -> dict[str, str]:
    lines = (ROOT / "docker" / "constraints.txt").read_text().splitlines()
    pins: dict[str, str] = {}
    for line in lines:
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version
    return pins


def test_the_base_image_is_pinned_to_an_exact_python() -> None:
    """`FROM python:X.Y.Z-...` or a digest, never a moving tag such as 3.11-slim."""
    (base,) = [line.split()[1] for line in INSTRUCTIONS if line.startswith("FROM ")]
    assert re.fullmatch(r"python:\d+\.\d+\.\d+-slim-\w+(@sha256:[0-9a-f]{64})?", base), base
    major_minor = ".".join(base.split(":")[1].split(".")[:2])
    assert major_minor == f"{sys.version_info.major}.{sys.version_info.minor}"


def test_the_image_installs_with_the_constraints_file() -> None:
    install = next(line for line in INSTRUCTIONS if line.startswith("RUN pip install"))
    assert "--constraint constraints.txt" in install
    assert any(line.startswith("COPY docker/constraints.txt") for line in INSTRUCTIONS)


def test_the_constraints_pin_every_runtime_dependency_within_its_range() -> None:
    """Every package of the runtime closure (as installed here) is pinned, nothing else is,
    and each direct dependency's pin satisfies pyproject.toml's range."""
    pins = _pins()
    assert set(pins) == set(runtime_closure()), "regenerate: python scripts/constraints.py"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for line in project["dependencies"]:
        requirement = Requirement(line)
        pinned = pins[canonicalize_name(requirement.name)]
        assert requirement.specifier.contains(pinned), (requirement, pinned)


def test_no_anonymous_volume_and_an_unprivileged_user() -> None:
    assert not any(line.startswith("VOLUME") for line in INSTRUCTIONS)
    assert "USER gencoach" in INSTRUCTIONS


def test_the_build_context_is_only_what_the_dockerfile_copies() -> None:
    """.dockerignore excludes everything (venvs, .git, output, caches, tests), then lets in
    exactly the sources of the Dockerfile's COPY lines."""
    rules = [
        line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]  # fmt: skip
    assert rules[0] == "*"
    allowed = {rule[1:] for rule in rules if rule.startswith("!")}
    copied = {
        source for line in INSTRUCTIONS if line.startswith("COPY ") for source in line.split()[1:-1]
    }
    assert copied == allowed
    assert {"**/__pycache__", "**/*.pyc"} <= set(rules)
