"""Sources beyond gencoach's saves, each read from a small file in its real shape."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gencoach.library import CanonicalDatasetAdapter, DatasetQuery, Outcome, Trajectory
from gencoach.library.build import build_library
from tests.library.sources import write_chat

FIXTURES = Path(__file__).parent / "fixtures"


def _read(tmp_path: Path, name: str) -> list[Trajectory]:
    """The records a library built from one fixture holds (at `tmp_path / name / lib`)."""
    folder = tmp_path / name
    folder.mkdir()
    shutil.copy(FIXTURES / name, folder / name)
    result = build_library([folder / name], folder / "lib", "r1")
    assert result.skipped == []
    with CanonicalDatasetAdapter(folder / "lib") as lib:
        return sorted((r.trajectory for r in lib.iter_records()), key=lambda t: str(t.locator))


def _roles(record: Trajectory) -> list[str]:
    return [event["message"]["role"] for event in record.events if "message" in event]


def test_openai_chat_with_tool_calls(tmp_path: Path) -> None:
    """An OpenAI-style row: system, user, a tool call, its result, the answer."""
    (record,) = _read(tmp_path, "openai_tools.jsonl")
    assert record.system == "You are a weather assistant."
    assert _roles(record) == ["user", "assistant", "tool", "assistant"]
    call = record.events[1]["message"]["tool_calls"][0]
    assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert record.tools[0]["function"]["name"] == "get_weather"
    assert record.eligibility["structural"]
    assert record.outcome is Outcome.UNKNOWN
    assert record.verification.strength.value == "none"


def test_sharegpt_rows_with_function_calls_and_expert_provenance(tmp_path: Path) -> None:
    """ShareGPT `from`/`value` turns, a function_call and its observation, and the row's
    stated expert provenance."""
    first, second = _read(tmp_path, "sharegpt.jsonl")
    assert first.provenance.value == "expert_or_reference_demonstration"
    assert first.system == "You are a helpful assistant."
    assert _roles(first) == ["user", "assistant"]
    assert second.provenance.value == "recorded_agent_completion"
    assert _roles(second) == ["user", "assistant", "tool", "assistant"]
    call = second.events[1]["message"]["tool_calls"][0]
    assert call["function"]["name"] == "get_weather"
    assert second.events[2]["message"]["tool_call_id"] == call["id"]
    # LLaMA-Factory's JSON-string tools, flat, in the canonical function-tool shape.
    assert second.tools == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    assert second.eligibility["structural"]
    assert first.task_key != second.task_key  # each row's own first user message


def test_sharegpt_top_level_system_opens_the_conversation(tmp_path: Path) -> None:
    """LLaMA-Factory's layout gives the system prompt as a top-level `system`: it is the
    record's system text, not a metadata key."""
    row = {
        "system": "You answer in one word.",
        "conversations": [{"from": "human", "value": "Capital of Italy?"},
                          {"from": "gpt", "value": "Rome"}],
    }  # fmt: skip
    folder = tmp_path / "sharegpt_system.jsonl"
    write_chat(folder, [row])
    build_library([folder], tmp_path / "lib", "r1")
    with CanonicalDatasetAdapter(tmp_path / "lib") as lib:
        (record,) = [r.trajectory for r in lib.iter_records()]
    assert record.system == "You answer in one word."
    assert _roles(record) == ["user", "assistant"]


@pytest.mark.parametrize(
    ("tools", "reason"),
    [
        ({"name": "x"}, "tools must be a list of objects"),
        ([{"description": "no name"}], "tools.0 needs a name"),
        ([{"name": "x", "parameters": "city"}], "tools.0.parameters must be a JSON Schema object"),
    ],
)
def test_tools_that_have_no_canonical_shape_are_refused(
    tmp_path: Path, tools: object, reason: str
) -> None:
    """A row whose tools cannot be put in the function-tool shape skips its file, with why;
    the other sources are built."""
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hey"}]
    write_chat(tmp_path / "bad.jsonl", [{"messages": messages, "tools": tools}])
    write_chat(tmp_path / "good.jsonl", [{"messages": messages}])
    result = build_library(
        [tmp_path / "bad.jsonl", tmp_path / "good.jsonl"], tmp_path / "lib", "r1"
    )
    assert [reason in skipped.reason for skipped in result.skipped] == [True]
    assert result.accepted == 1


def test_trl_prompt_completion_supervises_only_the_completion(tmp_path: Path) -> None:
    """Standard TRL rows are a user prompt and an assistant completion; conversational
    ones keep earlier assistant turns as context only."""
    standard = _read(tmp_path, "trl_prompt_completion.jsonl")
    assert [r.supervised_targets for r in standard] == [
        [{"role": "assistant", "content": " blue."}],
        [{"role": "assistant", "content": " 100 degrees Celsius at sea level."}],
    ]
    (conversational,) = _read(tmp_path, "trl_conversational.jsonl")
    assert [e["trainable"] for e in conversational.decisions] == [False, True]
    assert conversational.supervised_targets == [
        {"role": "assistant", "content": "Orange and red."}
    ]


def test_swe_agent_traj(tmp_path: Path) -> None:
    """A SWE-agent .traj: demonstrations left out, function calls answered by tool
    messages, the model from the replay config, and no invented verdict."""
    (record,) = _read(tmp_path, "django__django-11099.traj")
    assert record.benchmark == "swe-bench"
    assert record.task["target"] == "django__django-11099"
    assert record.task["scenario"] == "django/django"
    assert record.agent == {"id": "swe-agent", "version": "1.0.1", "model": "gpt-4o-2024-08-06"}
    assert _roles(record) == ["user", "assistant", "tool", "assistant", "tool"]
    assert "demonstration" not in str(record.events)
    assert record.events[0]["message"]["content"].startswith("<uploaded_files>")
    assert record.outcome is Outcome.UNKNOWN
    assert record.verification.evidence["exit_status"] == "submitted"
    assert record.verification.evidence["submitted_patch"] is True
    assert record.eligibility["structural"]


def test_tau_bench_results(tmp_path: Path) -> None:
    """τ-bench results: one trajectory per trial, the reward as the evaluator's verdict,
    the trials of one task as alternatives of one task key."""
    passed, failed = _read(tmp_path, "tau_bench_retail.json")
    assert passed.locator["trial"] == 0
    assert passed.outcome is Outcome.SUCCESS
    assert failed.outcome is Outcome.FAILURE
    assert passed.task_key == failed.task_key
    assert passed.verification.strength.value == "source_evaluator"
    assert passed.verification.evidence["reward_info"]["info"]["r_actions"] == 1.0
    assert _roles(passed) == ["user", "assistant", "tool", "assistant", "user"]
    with CanonicalDatasetAdapter(tmp_path / "tau_bench_retail.json" / "lib") as lib:
        best = lib.select(DatasetQuery(benchmarks="tau-bench", selection="best"))
        assert [row.trajectory_id for row in best] == [passed.id]


ROWS = [
    {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]},
    {"conversations": [{"from": "human", "value": "3+3?"}, {"from": "gpt", "value": "6"}]},
]


def test_datasets_saved_to_disk_and_parquet(tmp_path: Path) -> None:
    """A DatasetDict saved with save_to_disk (its split kept as the source split) and a
    parquet table are read without a download or a cache."""
    datasets = pytest.importorskip("datasets")
    saved = tmp_path / "saved"
    datasets.DatasetDict({"train": datasets.Dataset.from_list(ROWS[:1])}).save_to_disk(saved)
    table = tmp_path / "rows.parquet"
    datasets.Dataset.from_list([ROWS[1]]).to_parquet(table)
    build_library([saved, table], tmp_path / "lib", "r1")
    with CanonicalDatasetAdapter(tmp_path / "lib") as lib:
        records = {r.trajectory.source_id: r.trajectory for r in lib.iter_records()}
    assert sorted(records) == ["hf:saved", "parquet:rows.parquet"]
    assert records["hf:saved"].source_split == "train"
    assert records["hf:saved"].supervised_targets == [{"role": "assistant", "content": "4"}]
    assert records["parquet:rows.parquet"].supervised_targets[0]["content"] == "6"


def test_an_unreadable_foreign_file_is_named_and_skipped(tmp_path: Path) -> None:
    """A .traj that is not a trajectory and a τ-bench result without a reward are skipped
    with their reason; the rest is built."""
    (tmp_path / "bad.traj").write_text('{"info": {}}')
    (tmp_path / "bad.json").write_text('[{"task_id": 1, "traj": []}]')
    good = write_chat(tmp_path / "good.jsonl", [{"prompt": "a", "completion": "b"}])
    messages: list[str] = []
    build_library([tmp_path / "bad.traj", tmp_path / "bad.json", good], tmp_path / "lib", "r1",
                  say=messages.append)  # fmt: skip
    assert messages == [
        "skipped bad.traj: is not a SWE-agent trajectory (no `history` list)",
        "skipped bad.json: result 0: needs `reward`",
    ]
