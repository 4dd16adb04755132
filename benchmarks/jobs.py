"""Functions for benchmarks' workers, in a module light enough to import in a job."""

import json


def noop() -> None:
    """An RQ job that does nothing, to time a job's way there and back."""


def instant_diagnosis(messages: object, *, schema: object, model: object) -> str:
    """An instant backend: the second decision, always."""
    return json.dumps({"decision_index": 2, "reason": "r", "expected_decision": None})
