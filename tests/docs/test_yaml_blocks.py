"""Every YAML block of the README and the reference docs loads as shown, and a block of
gencoach settings loads as gencoach's configuration (docs/configuration.md's shows every
key)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from gencoach.config import Settings, load_settings

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```ya?ml\n(.*?)^```", re.MULTILINE | re.DOTALL)
BLOCKS = [
    (page, index, text)
    for page in PAGES
    for index, text in enumerate(BLOCK.findall(page.read_text(encoding="utf-8")))
]


def _is_settings(data: object) -> bool:
    return isinstance(data, dict) and bool(data) and set(data) <= set(Settings.model_fields)


@pytest.mark.parametrize(
    ("page", "index", "text"),
    BLOCKS,
    ids=[f"{page.relative_to(ROOT)}#{index}" for page, index, _ in BLOCKS],
)
def test_block_loads(page: Path, index: int, text: str, tmp_path: Path) -> None:
    """The block parses; gencoach settings load with an empty environment (an unset
    optional variable a block names is a warning, not a refusal)."""
    data = yaml.safe_load(text)
    if _is_settings(data):
        file = tmp_path / "gencoach.yaml"
        file.write_text(text, encoding="utf-8")
        load_settings(file, {})


def test_there_are_blocks_of_settings() -> None:
    assert any(_is_settings(yaml.safe_load(text)) for _, _, text in BLOCKS)


def _keys(model: type[BaseModel], prefix: str = "") -> set[str]:
    keys = set()
    for name, field in model.model_fields.items():
        keys.add(prefix + name)
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            keys |= _keys(kind, f"{prefix}{name}.")
    return keys


def _shown(data: dict[str, Any], prefix: str = "") -> set[str]:
    keys = set()
    for name, value in data.items():
        keys.add(prefix + name)
        if isinstance(value, dict) and name not in ("headers", "backends"):
            keys |= _shown(value, f"{prefix}{name}.")
    return keys


def test_the_configuration_example_shows_every_key() -> None:
    """docs/configuration.md's example (its first block of settings) names every key."""
    example = next(
        yaml.safe_load(text) for page, _, text in BLOCKS
        if page.name == "configuration.md" and _is_settings(yaml.safe_load(text))
    )  # fmt: skip
    from gencoach.config.settings import BackendSettings

    backend = next(iter(example["backends"].values()))
    assert _keys(Settings) - {"backends"} <= _shown(example)
    assert set(BackendSettings.model_fields) <= set(backend)
