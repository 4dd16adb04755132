"""SWE-agent trajectory files (`<instance_id>.traj`) as trajectories.

`SweAgentSource` reads one file as one trajectory of the `swe-bench` family, the task
its instance id (`owner__repo-number`). See docs/library.md ("Sources").
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

BENCHMARK = "swe-bench"


def _messages(history: list[Any]) -> list[dict[str, Any]]:
    """The messages of `history`, without the demonstration SWE-agent shows first
    (`is_demo`): it is part of the prompt, not of this run."""
    messages: list[dict[str, Any]] = []
    for index, item in enumerate(history):
        if not isinstance(item, dict):
            raise ValueError(f"history.{index} is not an object")
        if item.get("is_demo") or item.get("message_type") == "demonstration":
            continue
        role = item.get("role")
        message: dict[str, Any] = {"role": role, "content": item.get("content")}
        if role == "assistant" and item.get("tool_calls"):
            message["tool_calls"] = item["tool_calls"]
        if role == "tool":
            ids = item.get("tool_call_ids") or [None]
            message["tool_call_id"] = ids[0]
        messages.append(message)
    return messages


def _model(replay: object) -> str:
    try:
        config = json.loads(replay) if isinstance(replay, str) else replay
        name = config["agent"]["model"]["name"]  # type: ignore[index]
    except (ValueError, TypeError, KeyError):
        return "unknown"
    return name if isinstance(name, str) else "unknown"


class SweAgentSource(FileSource):
    """One SWE-agent `.traj` file: one trajectory.

    The file is one JSON object: `history` (the messages the model saw and wrote: `role`,
    `content` as text or parts, `message_type`, `tool_calls`/`tool_call_ids` in
    function-calling mode), `trajectory` (the steps), `info` (`exit_status`,
    `submission`, `swe_agent_version`) and `replay_config` (the run's configuration as a
    JSON string, `agent.model.name` its model).
    """

    kind = "swe-agent"

    def open(self) -> SourceContent:
        """Parse the file; a file that is not a SWE-agent trajectory raises `SourceError`."""
        source_id = f"swe-agent:{self.location}"
        return SourceContent(source_id, self._payloads(source_id))

    def _payloads(self, source_id: str) -> Iterator[dict[str, Any]]:
        try:
            data = json.loads(self.path.read_bytes())
            history = data.get("history") if isinstance(data, dict) else None
            if not isinstance(history, list) or not history:
                raise ValueError("is not a SWE-agent trajectory (no `history` list)")
            info = data.get("info") if isinstance(data.get("info"), dict) else {}
            instance = self.path.name.removesuffix(".traj")
            owner_repo = instance.rsplit("-", 1)[0].replace("__", "/")
            row = {
                "messages": _messages(history),
                "metadata": {
                    "benchmark": BENCHMARK, "scenario": owner_repo, "target": instance,
                    "target_kind": "instance", "generator": {"name": "swe-agent",
                    "version": str(info.get("swe_agent_version", "unknown"))},
                    "agent_id": "swe-agent",
                    "agent_version": str(info.get("swe_agent_version", "unknown")),
                    "model": _model(data.get("replay_config")),
                },
            }  # fmt: skip
            evidence = {"exit_status": info.get("exit_status"),
                        "submitted_patch": bool(info.get("submission")),
                        "steps": len(data.get("trajectory") or [])}  # fmt: skip
            # SWE-agent does not evaluate its patch: the outcome stays unknown (a
            # `submitted` exit is not a resolved issue), the exit status is evidence.
            checked = verification("none (SWE-agent does not evaluate its patch)",
                                   VerificationStrength.NONE, evidence)  # fmt: skip
            locator = {"kind": self.kind, "file": self.location, "instance_id": instance}
            payload = conversation_payload(row, source_id, self.revision, locator, None, checked)
        except (ValueError, UnicodeDecodeError) as error:
            raise SourceError(self.location, str(error)) from None
        except OSError as error:
            raise SourceError(self.location, f"cannot be read: {error.strerror}") from None
        yield payload
