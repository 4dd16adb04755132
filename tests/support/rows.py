"""A validator of the rows trainers read: every exported and canonical conversation.

A conversation is valid when every tool call is answered by exactly one `tool` message
before anything else is said (the calls of its last assistant message may stay
unanswered: they are the row's target), every `tool` message answers a call, no content
part is empty, no assistant message is empty, tool calls are OpenAI's
`{id, type: "function", function: {name, arguments: JSON object text}}` and tools are in
one shape, `{type: "function", function: {name, description, parameters}}`, whatever
the source.

`check_outputs(root)` finds what the suites wrote below `root`: export folders (an
`export_manifest.json` beside chat and preference files), libraries (`manifest.json`
beside `index.sqlite`) and canonical record files (`gencoach library canonical`), and
checks every row, every record's tools, every structurally eligible record's events and
every example of both views. The export and library
suites run it after each test (their `conftest.py`); `check_rows` and `check_file` serve
rows written elsewhere.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import pytest

EXPORT_MANIFEST: Final = "export_manifest.json"
LIBRARY_MANIFEST: Final = "manifest.json"
LIBRARY_INDEX: Final = "index.sqlite"
_PART_TEXT: Final = {"text": "text", "thinking": "thinking"}
_FUNCTION_KEYS: Final = {"name", "description", "parameters", "strict"}
_NOT_ROWS: Final = {EXPORT_MANIFEST, "export_failures.json"}


def tool_problems(tools: object) -> list[str]:
    """What is wrong with a list of tools: each must be an OpenAI function tool."""
    if not isinstance(tools, list):
        return [f"tools must be a list, got {tools!r}"]
    problems = []
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if (
            not isinstance(tool, dict)
            or set(tool) != {"type", "function"}
            or tool["type"] != "function"
            or not isinstance(function, dict)
            or set(function) - _FUNCTION_KEYS
            or not isinstance(function.get("name"), str)
            or not function["name"]
            or not isinstance(function.get("description", ""), str)
            or not isinstance(function.get("parameters"), dict)
            or function["parameters"].get("type") != "object"
        ):
            problems.append(f"tools.{index} is not {{type: function, function: ...}}: {tool!r}")
    return problems


def _call_problems(calls: object, where: str) -> tuple[list[str], list[str]]:
    """The problems of an assistant message's tool calls, and their ids."""
    if calls is None:
        return [], []
    if not isinstance(calls, list):
        return [f"{where}.tool_calls must be a list"], []
    problems: list[str] = []
    ids: list[str] = []
    for index, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        name = f"{where}.tool_calls.{index}"
        if (
            not isinstance(call, dict)
            or not isinstance(call.get("id"), str)
            or call.get("type") != "function"
            or not isinstance(function, dict)
            or not isinstance(function.get("name"), str)
            or not isinstance(function.get("arguments"), str)
        ):
            problems.append(f"{name} is not {{id, type: function, function: {{name, arguments}}}}")
            continue
        try:
            arguments = json.loads(function["arguments"])
        except ValueError:
            arguments = None
        if not isinstance(arguments, dict):
            problems.append(f"{name}.function.arguments is not the JSON text of an object")
        ids.append(call["id"])
    return problems, ids


def _content_problems(message: Mapping[str, Any], where: str) -> tuple[list[str], bool]:
    """The problems of a message's content, and whether it says anything."""
    content = message.get("content")
    if content is None or isinstance(content, str):
        return [], bool(content)
    if not isinstance(content, list):
        return [f"{where}.content is neither a string nor a list of parts"], False
    problems = []
    for index, part in enumerate(content):
        key = _PART_TEXT.get(part.get("type") or "") if isinstance(part, dict) else None
        if key is None:
            problems.append(f"{where}.content.{index} is not a text or thinking part: {part!r}")
        elif not isinstance(part.get(key), str) or not part[key]:
            problems.append(f"{where}.content.{index} is an empty {part['type']} part")
    return problems, bool(content)


def conversation_problems(messages: object, tools: object = ()) -> list[str]:
    """What is wrong with a conversation (and its tools) as trainers read it."""
    problems = tool_problems(list(tools) if isinstance(tools, tuple) else tools)
    if not isinstance(messages, list) or not messages:
        return [*problems, "messages must be a non-empty list"]
    pending: list[str] = []
    answered: set[str] = set()
    for index, message in enumerate(messages):
        where = f"messages.{index}"
        if not isinstance(message, dict):
            problems.append(f"{where} is not an object")
            continue
        role = message.get("role")
        found, says = _content_problems(message, where)
        problems.extend(found)
        if role == "tool":
            call = message.get("tool_call_id")
            if call in pending:
                pending.remove(call)
                answered.add(call)
            elif call in answered:
                problems.append(f"{where} answers call {call!r} a second time")
            else:
                problems.append(f"{where} answers no pending call ({call!r})")
            continue
        if pending:
            problems.append(f"{where} ({role}) comes before call(s) {pending} are answered")
        pending, answered = [], set()
        if role == "assistant":
            found, ids = _call_problems(message.get("tool_calls"), where)
            problems.extend(found)
            if not says and not ids:
                problems.append(f"{where} is an empty assistant message")
            pending = ids
    return problems


def row_problems(row: Mapping[str, Any]) -> list[str]:
    """What is wrong with a row, read by its shape: chat `messages`, prompt/completion,
    preference prompt/chosen/rejected, a library view's example. Rows of other formats
    (full-history's MAGMA rows) have no conversation to check: none."""
    tools = row.get("tools", [])
    if "messages" in row:
        return conversation_problems(row["messages"], tools)
    if "model_input" in row and "loss_mask" in row:
        return conversation_problems(row["model_input"], tools)
    if "context" in row and "supervised_target" in row:
        return conversation_problems([*row["context"], row["supervised_target"]], tools)
    if "prompt" in row and "completion" in row:
        return conversation_problems([*row["prompt"], *row["completion"]], tools)
    if "prompt" in row and "chosen" in row and "rejected" in row:
        return [
            *(
                f"chosen: {p}"
                for p in conversation_problems([*row["prompt"], *row["chosen"]], tools)
            ),
            *(f"rejected: {p}" for p in conversation_problems([*row["prompt"], *row["rejected"]])),
        ]
    return []


def check_rows(rows: Iterable[Mapping[str, Any]], where: str) -> int:
    """Assert every row is valid; how many rows had a conversation to check."""
    checked = 0
    failures: list[str] = []
    for index, row in enumerate(rows):
        failures.extend(f"{where} row {index}: {problem}" for problem in row_problems(row))
        checked += bool({"messages", "model_input", "context", "prompt"} & set(row))
    assert not failures, "\n".join(failures[:20])
    return checked


def _rows(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        data = json.loads(text)
        return data if isinstance(data, list) else []
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def check_file(path: Path) -> int:
    """Assert every row of a `.jsonl` file or `.json` array is valid; rows checked."""
    return check_rows(_rows(path), str(path))


def record_problems(record: Mapping[str, Any]) -> list[str]:
    """What is wrong with a canonical record (a payload, as shards and `canonical` files
    hold it whole): its tools must be function tools and, when it is marked structurally
    eligible, its conversation (system, then its events' messages) valid."""
    problems = tool_problems(record["tools"])
    if record["eligibility"]["structural"]:
        messages = [{"role": "system", "content": record["system"]}] if record["system"] else []
        messages += [event["message"] for event in record["events"] if "message" in event]
        problems += conversation_problems(messages)
    return problems


def check_record(record: Mapping[str, Any]) -> None:
    """Assert a canonical record is valid (see `record_problems`)."""
    problems = record_problems(record)
    where = f"record {record['id']} ({record['source_id']})"
    assert not problems, f"{where}:\n" + "\n".join(problems)


def check_canonical_file(path: Path) -> int:
    """Assert every record of a canonical file (`gencoach library canonical`) is valid."""
    records = _rows(path)
    for record in records:
        check_record(record)
    return len(records)


def check_library(path: Path) -> int:
    """Assert every readable record and every example of both views (and its chat row) of
    a library is valid; examples checked. A library that cannot be opened is not ours to
    judge (a test may have broken it on purpose)."""
    from gencoach.library import (
        CanonicalDatasetAdapter,
        ContentAvailability,
        DatasetQuery,
        TrainingView,
    )
    from gencoach.library.errors import LibraryError
    from gencoach.library.output import chat_row
    from gencoach.library.views import FullTrajectoryExample

    try:
        lib = CanonicalDatasetAdapter(path)
    except LibraryError:
        return 0
    checked = 0
    with lib:
        hosted = (ContentAvailability.HOSTED, ContentAvailability.OVERLAY)
        readable = DatasetQuery(content_availability=hosted)
        for record in lib.iter_records(readable):
            check_record(dataclasses.asdict(record.trajectory))
        eligible = DatasetQuery(content_availability=hosted, structurally_eligible=True)
        for example in lib.iter_examples(eligible, view=TrainingView.FULL_TRAJECTORY):
            assert isinstance(example, FullTrajectoryExample)
            checked += check_rows([example.to_dict(), chat_row(example)], f"{path} full")
        for example in lib.iter_examples(eligible, view=TrainingView.ASSISTANT_TURN):
            checked += check_rows([example.to_dict()], f"{path} turn")
    return checked


def check_outputs(root: Path) -> int:
    """Check every export folder and library below `root`; rows and examples checked."""
    checked = 0
    for manifest in sorted(root.rglob(EXPORT_MANIFEST)):
        for path in sorted(manifest.parent.iterdir()):
            if path.suffix in (".jsonl", ".json") and path.name not in _NOT_ROWS:
                checked += check_file(path)
    libraries = []
    for manifest in sorted(root.rglob(LIBRARY_MANIFEST)):
        if (manifest.parent / LIBRARY_INDEX).is_file():
            libraries.append(manifest.parent)
            checked += check_library(manifest.parent)
    for path in sorted(root.rglob("*.jsonl")):
        inside = any(path.is_relative_to(library) for library in libraries)
        if path.is_file() and not inside and _first_is_record(path):
            checked += check_canonical_file(path)
    return checked


def _first_is_record(path: Path) -> bool:
    """Whether a `.jsonl` file opens with a canonical record (what `canonical` writes)."""
    from gencoach.library.sources.canonical_file import is_canonical

    with path.open("rb") as handle:
        first = next((line for line in handle if line.strip()), b"")
    try:
        return is_canonical(json.loads(first))
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def rows_trainers_can_trust(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test, every row it exported and every library it built below its
    `tmp_path` passes the row validator (imported by the suites' conftest.py)."""
    root = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    if root is not None:
        check_outputs(root)
