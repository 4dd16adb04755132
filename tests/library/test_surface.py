"""The consumer side's public surface and its independence from the source side."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import gencoach.library

CONSUMER_MODULES = [
    "gencoach.library",
    "gencoach.library.adapter",
    "gencoach.library.errors",
    "gencoach.library.evaluation",
    "gencoach.library.index",
    "gencoach.library.layout",
    "gencoach.library.loaders",
    "gencoach.library.manifest",
    "gencoach.library.metadata",
    "gencoach.library.overlays",
    "gencoach.library.prefixes",
    "gencoach.library.query",
    "gencoach.library.records",
    "gencoach.library.sampling",
    "gencoach.library.views",
]
# What the consumer may load of gencoach beyond its own modules: the version and errors.
ALLOWED = {
    "gencoach",
    "gencoach.__about__",
    "gencoach.errors",
    "gencoach.runtime",
    "gencoach.runtime.lazy",
}

_PROBE = """
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps(sorted(sys.modules)))
"""


def test_public_names_are_pinned() -> None:
    """The package exports exactly the consumer API."""
    assert set(gencoach.library.__all__) == {
        "API_VERSION", "FORMAT_VERSION", "AssistantTurnExample", "AuditState",
        "CanonicalDatasetAdapter", "ContentAvailability", "Contributor", "DatasetQuery",
        "DatasetRecord", "EvaluationBundle", "EvaluationReference", "EventKind",
        "FullTrajectoryExample", "LibraryError", "MissingTrajectoryContentError", "Outcome",
        "Permission", "PermissionRecord", "Provenance", "QualityTier", "QueryError",
        "SamplingConfig", "SamplingStrategy", "SourceError", "Split", "TrainingView",
        "Trajectory", "TrajectoryMetadata", "TrajectorySelection", "Verification",
        "VerificationStrength",
    }  # fmt: skip


@pytest.mark.slow
def test_consumer_imports_no_source_parser_or_generation_code() -> None:
    """Importing every consumer module, in a fresh interpreter, loads no source adapter,
    builder, save reader, export, protocol or service module, nor pydantic or torch."""
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, *CONSUMER_MODULES],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    loaded = set(json.loads(result.stdout))
    ours = {name for name in loaded if name == "gencoach" or name.startswith("gencoach.")}
    foreign = sorted(ours - ALLOWED - set(CONSUMER_MODULES))
    assert foreign == []
    assert not {"pydantic", "torch", "typer", "rich"} & {name.split(".")[0] for name in loaded}


def test_api_version_is_carried_by_the_adapter() -> None:
    """The adapter carries its API version, separate from the on-disk format version."""
    assert gencoach.library.CanonicalDatasetAdapter.api_version == gencoach.library.API_VERSION
    assert gencoach.library.API_VERSION == "1.3"
