"""Fixtures that write config files and load them with an explicit environment."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path

import pytest

from gencoach.config import Settings, load_settings
from gencoach.errors import ConfigError

from .checks import Load, Refuse, Write


@pytest.fixture
def write(tmp_path: Path) -> Write:
    """Write dedented YAML text to a file under tmp_path and return its path."""

    def write(text: str, name: str = "gencoach.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return path

    return write


@pytest.fixture
def load(write: Write) -> Load:
    """Load settings from YAML text and an environment dict."""

    def load(text: str = "", env: Mapping[str, str] | None = None) -> Settings:
        return load_settings(write(text), env or {})

    return load


@pytest.fixture
def refuse(write: Write) -> Refuse:
    """Load settings from YAML text and an environment dict, expecting a ConfigError."""

    def refuse(text: str = "", env: Mapping[str, str] | None = None) -> ConfigError:
        with pytest.raises(ConfigError) as caught:
            load_settings(write(text), env or {})
        return caught.value

    return refuse
