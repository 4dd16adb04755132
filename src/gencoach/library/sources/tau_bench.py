"""τ-bench results files (what `run.py` writes: a JSON list of run results) as trajectories.

`TauBenchSource` reads each result `{task_id, reward, info, traj, trial}` as one
trajectory, its outcome the reward τ-bench's evaluator gave. See docs/library.md
("Sources").
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from gencoach.library.errors import SourceError
from gencoach.library.records import VerificationStrength
from gencoach.library.sources.base import FileSource, SourceContent
from gencoach.library.sources.canonical import verification
from gencoach.library.sources.chat import conversation_payload

BENCHMARK = "tau-bench"
METHOD = "tau-bench reward (final database state and required outputs)"


def _row(result: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A result as a conversation row, and its verification.

    `traj` is the OpenAI-style conversation; `info` holds the `task` (its `instruction`)
    and `reward_info`. τ-bench's evaluator decided the reward (the final database state
    and the required outputs), so a reward of 1 is a success and anything else a failure,
    both verified by the source evaluator. The task is the task id with its instruction
    (ids repeat across τ-bench's environments); trials of one task are its alternatives.
    """
    for key in ("task_id", "reward", "traj"):
        if key not in result:
            raise ValueError(f"needs `{key}`")
    reward = result["reward"]
    if isinstance(reward, bool) or not isinstance(reward, int | float):
        raise ValueError("reward must be a number")
    info: dict[str, Any] = result["info"] if isinstance(result.get("info"), dict) else {}
    task: dict[str, Any] = info["task"] if isinstance(info.get("task"), dict) else {}
    instruction = task.get("instruction", "")
    row = {
        "messages": result["traj"],
        "metadata": {
            "benchmark": BENCHMARK, "scenario": str(info.get("env", "tau-bench")),
            "target": f"task-{result['task_id']}", "target_kind": "task",
            "task_description": instruction if isinstance(instruction, str) else "",
            "generator": {"name": "tau-bench", "version": "unknown"},
            "outcome": "success" if reward == 1 else "failure", "reward": reward,
        },
    }  # fmt: skip
    evidence = {"reward": reward, "reward_info": info.get("reward_info")}
    return row, verification(METHOD, VerificationStrength.SOURCE_EVALUATOR, evidence)


class TauBenchSource(FileSource):
    """A τ-bench results `.json` file: one trajectory per result."""

    kind = "tau-bench"

    def open(self) -> SourceContent:
        """Parse the file; a result that cannot be read raises `SourceError` naming it."""
        source_id = f"tau-bench:{self.location}"
        return SourceContent(source_id, self._payloads(source_id))

    def _payloads(self, source_id: str) -> Iterator[dict[str, Any]]:
        try:
            results = json.loads(self.path.read_bytes())
        except (ValueError, UnicodeDecodeError) as error:
            raise SourceError(self.location, f"is not JSON: {error}") from None
        except OSError as error:
            raise SourceError(self.location, f"cannot be read: {error.strerror}") from None
        if not isinstance(results, list):
            raise SourceError(self.location, "is not τ-bench results (a JSON list of results)")
        for index, result in enumerate(results):
            try:
                if not isinstance(result, dict):
                    raise ValueError("is not an object")
                row, checked = _row(result)
                locator = {"kind": self.kind, "file": self.location, "index": index,
                           "task_id": result["task_id"], "trial": result.get("trial")}  # fmt: skip
                yield conversation_payload(row, source_id, self.revision, locator, None, checked)
            except ValueError as error:
                raise SourceError(self.location, f"result {index}: {error}") from None
