"""The `gencoach` namespace: the names integrators and agent authors import, and only those."""

from __future__ import annotations

import subprocess
import sys

import pytest

import gencoach

PUBLIC = {
    "AsyncReporter",
    "BranchOrder",
    "CampaignOptions",
    "CanonicalDatasetAdapter",
    "Coach",
    "ContractError",
    "EnvAgentOptions",
    "Exporter",
    "GencoachError",
    "GymAdapter",
    "OracleTeacher",
    "OrderReader",
    "Policy",
    "ReportError",
    "Reporter",
    "SaveError",
    "SavedGraph",
    "Tool",
    "__version__",
    "audit",
    "check_agent",
    "create_agent_app",
    "env_app",
    "read_save",
    "run_campaign",
    "run_export",
}


def test_the_namespace_is_the_curated_list() -> None:
    """Adding or removing a public name is a decision this test makes visible."""
    assert set(gencoach.__all__) == PUBLIC


def test_every_public_name_resolves_to_the_object_its_module_defines() -> None:
    """`gencoach.X` is the very object of the module that defines it (no copies)."""
    for name in PUBLIC - {"__version__"}:
        value = getattr(gencoach, name)
        assert getattr(value, "__name__", name) == name, name


def test_importing_gencoach_imports_none_of_the_service() -> None:
    """`import gencoach` stays cheap: the names are imported on first use."""
    code = (
        "import sys, gencoach; "
        "print(sorted(m for m in sys.modules if m.startswith('gencoach.') "
        "and m not in ('gencoach.__about__', 'gencoach.runtime', 'gencoach.runtime.lazy')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_an_unknown_name_is_an_attribute_error() -> None:
    """A typo reads as Python's own error, naming the package."""
    with pytest.raises(AttributeError, match="'gencoach' has no attribute 'Reportr'"):
        gencoach.Reportr  # noqa: B018
