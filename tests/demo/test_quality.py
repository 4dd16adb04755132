"""The coach quality table and the demo's summary lines, from requests as the API lists them."""

from __future__ import annotations

from typing import Any

from gencoach.demo.quality import Quality, maker, quality_of, summary_lines, table_rows


def _request(
    route: str,
    state: str,
    *,
    blame: str | None = None,
    rule: str = "llm",
    source: str | None = None,
    tokens: int = 0,
    corrected_after_s: float | None = None,
) -> dict[str, Any]:
    history = [{"state": "opportunity", "after_s": 0.0}]
    if corrected_after_s is not None:
        history.append({"state": "corrected", "after_s": corrected_after_s})
    history.append({"state": state, "after_s": 9.0})
    return {
        "route": route,
        "state": state,
        "blame": blame,
        "diagnosis": {"rule": rule} if blame not in (None, "none", "declined") else None,
        "decision_source": source,
        "tokens": tokens,
        "history": history,
    }


RUN = [
    _request("failure", "proven", blame="right", source="expected_decision", tokens=30,
             corrected_after_s=2.0),
    _request("failure", "proven", blame="wrong", source="fallback", tokens=30,
             corrected_after_s=4.0),
    _request("failure", "unproven", blame="right", source="repair_model", tokens=30,
             corrected_after_s=1.0, rule="single_step"),
    _request("failure", "abandoned", blame="none", tokens=20),
    _request("failure", "skipped"),
    _request("suboptimal", "declined", blame="declined", tokens=10),
    _request("format", "proven", source=None, corrected_after_s=1.0),
]  # fmt: skip


def test_the_table_counts_blame_proofs_makers_and_costs_per_route() -> None:
    """Per route and in all: the judged diagnoses (those of the single-step rule apart) by
    blame, admitted and proven requests, corrections by who made them, proven corrections
    by decision source, the median time to a proven correction, and gencoach's tokens per
    proven correction."""
    rows = {row[0]: row for row in table_rows(quality_of(RUN))}
    assert rows["failure"] == (
        "failure", "4", "1", "2/4", "1/4", "0/4", "1/4", "4", "2 (50%)", "2", "1", "0",
        "expected_decision 1, fallback 1", "3.0", "55",
    )  # fmt: skip
    assert rows["suboptimal"] == (
        "suboptimal", "1", "0", "0/1", "0/1", "1/1", "0/1", "1", "0 (0%)", "0", "0", "0", "-", "-",
        "-",
    )  # fmt: skip
    assert rows["format"] == (
        "format", "0", "0", "-", "-", "-", "-", "1", "1 (100%)", "0", "0", "1", "unknown 1", "1.0",
        "0",
    )  # fmt: skip
    assert rows["all"][1:9] == ("5", "1", "2/5", "1/5", "1/5", "1/5", "6", "3 (50%)")
    assert list(rows) == ["failure", "format", "suboptimal", "all"]


def test_runs_merge_into_one_table() -> None:
    """Two runs' tables add up to the table of their requests together."""
    merged = Quality()
    merged.merge(quality_of(RUN[:3]))
    merged.merge(quality_of(RUN[3:]))
    assert table_rows(merged) == table_rows(quality_of(RUN))


def test_the_demo_summary_names_sources_and_accuracy() -> None:
    """The demo prints proven corrections by decision source, then the diagnoses' accuracy."""
    assert summary_lines(quality_of(RUN)) == [
        "proven corrections by decision source: expected_decision 1, fallback 1, unknown 1",
        "diagnoses against the simulator's truth: 2 of 5 blamed the faulty decision, "
        "1 another, 1 declined, 1 gave no diagnosis (1 made by the single-step rule)",
    ]


def test_without_truth_the_summary_says_nothing_of_accuracy() -> None:
    """Runs whose generator knows no truth print only the sources."""
    unjudged = [{**request, "blame": None} for request in RUN]
    assert len(summary_lines(quality_of(unjudged))) == 1


def test_model_made_sources_are_told_from_fallbacks() -> None:
    """The diagnosis's decision, the agent's repair model and the rewriter are a model's;
    a fallback is not; rules, people and unknown sources are other."""
    assert [maker(s) for s in ("expected_decision", "repair_model", "rewrite")] == ["model"] * 3
    assert maker("fallback") == "fallback"
    assert [maker(s) for s in ("rule", "human", "unknown", None)] == ["other"] * 4
