"""The committed OpenAPI document is the one the controller serves."""

from __future__ import annotations

import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_committed_openapi_matches_the_app() -> None:
    """docs/openapi.json equals what `make openapi` generates from the app today."""
    generator = runpy.run_path(str(ROOT / "scripts" / "openapi.py"))
    committed = (ROOT / "docs" / "openapi.json").read_text()
    assert committed == generator["render"](), "docs/openapi.json is stale: run `make openapi`"


def test_openapi_lists_every_documented_route() -> None:
    """Every route docs/http-api.md describes is in the generated document."""
    generator = runpy.run_path(str(ROOT / "scripts" / "openapi.py"))
    paths = generator["document"]()["paths"]
    prose = (ROOT / "docs" / "http-api.md").read_text()
    for path, operations in paths.items():
        for method in operations:
            assert f"{method.upper()} {path}" in prose, f"{method.upper()} {path} is undocumented"
