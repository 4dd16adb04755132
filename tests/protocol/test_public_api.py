"""The public surface of gencoach.protocol."""

from __future__ import annotations

import gencoach.protocol


def _isort_key(name: str) -> tuple[int, str]:
    """Ruff's RUF022 order: CONSTANTS, then CamelCase, then the rest, each alphabetical."""
    if name.isupper():
        return (0, name)
    return (1, name) if name[0].isupper() else (2, name)


def test_all_is_sorted_and_unique() -> None:
    """`__all__` lists each name once, in the order ruff enforces."""
    names = gencoach.protocol.__all__
    assert len(set(names)) == len(names)
    assert names == sorted(names, key=_isort_key)


def test_every_public_name_is_importable() -> None:
    """Every name in `__all__` is an attribute of the package."""
    missing = [name for name in gencoach.protocol.__all__ if not hasattr(gencoach.protocol, name)]
    assert missing == []


def test_public_surface_is_pinned() -> None:
    """The exported names change only on purpose."""
    assert set(gencoach.protocol.__all__) == {
        "COACHING_KINDS", "EVENTS_VERSION", "EVENT_TYPES", "GRAPH_FORMAT_MAJOR",
        "GRAPH_FORMAT_VERSION", "ID_RULE", "MAX_ID_LENGTH", "PROTOCOL_VERSION", "RECOVERY_POINT",
        "REPLACEMENT_POINT", "DECISION_SOURCES", "DECISION_SOURCE_KEY", "MODEL_SOURCES",
        "DecisionSource", "as_decision_source",
        "REPLACE_DECISION", "REPLACE_SAY", "AgentDecision", "AgentError", "AgentHealth",
        "AgentInfo", "AgentInput", "AgentInstruction", "AgentOutput", "AgentRequest",
        "AgentResponse", "AnyEvent", "BranchAnchor", "BranchOrder", "CandidateCreated",
        "CandidateExecuted", "CandidateRecord", "CandidateStatus", "CaseSelectionAnswer",
        "CoachingBackendConfig", "CoachingDiagnosis", "CoachingError", "CoachingKind",
        "CoachingLog", "CoachingMarker", "CoachingPayload", "CoachingProposal",
        "CoachingSessionConfig", "CoachingStage", "CoachingStep", "ContractModel",
        "ContractRootModel", "DescendantScore", "EventBase", "FailureDiagnosisAnswer",
        "FieldError", "GenerationEvent", "GeneratorInfo", "Identifier", "InternalStep",
        "JsonObject",
        "NonEmptyStr", "Producer", "ReinjectionPoint", "ReplaceDecision", "ReplaceSay",
        "RunConfig", "RunFinished", "RunSettled", "RunStarted", "SituationCreated", "SituationLink",
        "SituationRecord", "SpecializedCoachingRequest", "SpecializedCoachingResponse",
        "StageDescription", "StageEnd", "StageInfo", "StageScore", "SuboptimalDiagnosisAnswer",
            "TaskDescription", "ToolCall", "UNKNOWN_AGENT",
        "answer_schema", "coached_input", "decode_json", "id_problem", "parse_as",
            "parse_branch_order",
        "parse_branch_order_json", "parse_coaching_payload", "parse_event", "parse_event_json",
        "parse_llm_answer", "parse_tagged", "terminal_of", "without_coaching", "COACHING_KEY",
        "execution_items", "single_bad_call", "DECISION_SOURCE_CAPABILITY", "payload_sent",
    }  # fmt: skip
