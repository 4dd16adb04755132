"""The trajectory library: a canonical, queryable, read-only store of generated trajectories.

The consumer side only (`CanonicalDatasetAdapter` and the records, queries, views and
sampling it speaks, API 1.3): it imports no source adapter, builder or generation code,
so a training job can read a library without them. See docs/library.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gencoach.runtime.lazy import lazy_names

if TYPE_CHECKING:
    from gencoach.library.adapter import CanonicalDatasetAdapter
    from gencoach.library.errors import (
        LibraryError,
        MissingTrajectoryContentError,
        QueryError,
        SourceError,
    )
    from gencoach.library.evaluation import EvaluationBundle, EvaluationReference
    from gencoach.library.layout import API_VERSION, FORMAT_VERSION
    from gencoach.library.metadata import DatasetRecord, PermissionRecord, TrajectoryMetadata
    from gencoach.library.query import DatasetQuery, TrainingView, TrajectorySelection
    from gencoach.library.records import (
        AuditState,
        ContentAvailability,
        Contributor,
        EventKind,
        Outcome,
        Permission,
        Provenance,
        QualityTier,
        Split,
        Trajectory,
        Verification,
        VerificationStrength,
    )
    from gencoach.library.sampling import SamplingConfig, SamplingStrategy
    from gencoach.library.views import AssistantTurnExample, FullTrajectoryExample

# Each name's module, imported on first use: `gencoach library`'s options and errors load
# without the adapter.
_MODULES = {
    "API_VERSION": "gencoach.library.layout",
    "AssistantTurnExample": "gencoach.library.views",
    "AuditState": "gencoach.library.records",
    "CanonicalDatasetAdapter": "gencoach.library.adapter",
    "ContentAvailability": "gencoach.library.records",
    "Contributor": "gencoach.library.records",
    "DatasetQuery": "gencoach.library.query",
    "DatasetRecord": "gencoach.library.metadata",
    "EvaluationBundle": "gencoach.library.evaluation",
    "EvaluationReference": "gencoach.library.evaluation",
    "EventKind": "gencoach.library.records",
    "FORMAT_VERSION": "gencoach.library.layout",
    "FullTrajectoryExample": "gencoach.library.views",
    "LibraryError": "gencoach.library.errors",
    "MissingTrajectoryContentError": "gencoach.library.errors",
    "Outcome": "gencoach.library.records",
    "Permission": "gencoach.library.records",
    "PermissionRecord": "gencoach.library.metadata",
    "Provenance": "gencoach.library.records",
    "QualityTier": "gencoach.library.records",
    "QueryError": "gencoach.library.errors",
    "SamplingConfig": "gencoach.library.sampling",
    "SamplingStrategy": "gencoach.library.sampling",
    "SourceError": "gencoach.library.errors",
    "Split": "gencoach.library.records",
    "TrainingView": "gencoach.library.query",
    "Trajectory": "gencoach.library.records",
    "TrajectoryMetadata": "gencoach.library.metadata",
    "TrajectorySelection": "gencoach.library.query",
    "Verification": "gencoach.library.records",
    "VerificationStrength": "gencoach.library.records",
}

__getattr__ = lazy_names(__name__, _MODULES)

__all__ = [
    "API_VERSION",
    "FORMAT_VERSION",
    "AssistantTurnExample",
    "AuditState",
    "CanonicalDatasetAdapter",
    "ContentAvailability",
    "Contributor",
    "DatasetQuery",
    "DatasetRecord",
    "EvaluationBundle",
    "EvaluationReference",
    "EventKind",
    "FullTrajectoryExample",
    "LibraryError",
    "MissingTrajectoryContentError",
    "Outcome",
    "Permission",
    "PermissionRecord",
    "Provenance",
    "QualityTier",
    "QueryError",
    "SamplingConfig",
    "SamplingStrategy",
    "SourceError",
    "Split",
    "TrainingView",
    "Trajectory",
    "TrajectoryMetadata",
    "TrajectorySelection",
    "Verification",
    "VerificationStrength",
]
