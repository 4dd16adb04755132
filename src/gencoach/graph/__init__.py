"""MAGMA-GEN 2.0 saves: descendant scores, the atomic writer and the strict reader."""

from gencoach.graph.reader import SavedGraph, find_folders, read_config, read_save
from gencoach.graph.scores import Outcome, ScoredCandidate, descendant_scores, outcome_of
from gencoach.graph.writer import (
    CONFIG_FILE,
    LOGS_DIR,
    REQUESTS_FILE,
    run_folder_name,
    write_save,
)

__all__ = [
    "CONFIG_FILE",
    "LOGS_DIR",
    "REQUESTS_FILE",
    "Outcome",
    "SavedGraph",
    "ScoredCandidate",
    "descendant_scores",
    "find_folders",
    "outcome_of",
    "read_config",
    "read_save",
    "run_folder_name",
    "write_save",
]
