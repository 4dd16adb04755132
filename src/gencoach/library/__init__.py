"""The trajectory library: a canonical, queryable, read-only store of generated trajectories.

This package's surface is the consumer side only (`CanonicalDatasetAdapter` and the
records, queries, views and sampling it speaks). It imports nothing from the source
adapters (`gencoach.library.sources`), the builder, or gencoach's generation code, so a
training job can read a library without them. Libraries are made by
`gencoach library build` and grown by `gencoach library append`.
"""

from gencoach.library.adapter import CanonicalDatasetAdapter, EvaluationBundle
from gencoach.library.errors import LibraryError, QueryError, SourceError
from gencoach.library.index import IndexRow
from gencoach.library.layout import API_VERSION, FORMAT_VERSION
from gencoach.library.query import DatasetQuery, Selection, TrainingView
from gencoach.library.records import (
    Contributor,
    EventKind,
    Outcome,
    Provenance,
    QualityTier,
    Split,
    Trajectory,
)
from gencoach.library.sampling import SamplingConfig, SamplingStrategy
from gencoach.library.views import AssistantTurnExample, FullTrajectoryExample

__all__ = [
    "API_VERSION",
    "FORMAT_VERSION",
    "AssistantTurnExample",
    "CanonicalDatasetAdapter",
    "Contributor",
    "DatasetQuery",
    "EvaluationBundle",
    "EventKind",
    "FullTrajectoryExample",
    "IndexRow",
    "LibraryError",
    "Outcome",
    "Provenance",
    "QualityTier",
    "QueryError",
    "SamplingConfig",
    "SamplingStrategy",
    "Selection",
    "SourceError",
    "Split",
    "TrainingView",
    "Trajectory",
]
