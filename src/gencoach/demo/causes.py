"""Why nothing was proven: the causes a demo's logs name, in words an operator acts on.

The controller and the workers log JSON lines; a backend that refuses the structured
output asked of it, answers cut at the token limit, a model that is unreachable, jobs
that time out or queues nobody consumes each leave a recognisable event. `causes` turns
them into at most a few sentences, the most telling first, each naming what to change.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

_STRICT = re.compile(r"refuses structured_output (\w+): set structured_output: (\w+)")
_TIMED_OUT = "did not finish within"


def _events(paths: Iterable[Path]) -> Iterator[dict[str, Any]]:
    for path in paths:
        if not path.exists():
            continue
        for line in path.read_text(errors="replace").splitlines():
            if not line.startswith("{"):
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                yield event


def _cause(event: dict[str, Any]) -> tuple[int, str] | None:
    """A cause and its rank (lower is more telling), or None for an ordinary event."""
    name, backend = event.get("event"), event.get("backend", "?")
    cause = str(event.get("cause", ""))
    if name == "backend.refused":
        strict = _STRICT.search(cause)
        if strict is not None:
            mode, advice = strict.groups()
            return 0, f"backend {backend} refused {mode}; set structured_output: {advice}"
        return 1, f"backend {backend} refused the request: {cause}"
    if name == "backend.truncated":
        limit = event.get("max_tokens")
        return 2, f"backend {backend} answers were cut at max_tokens {limit}; raise max_tokens"
    if name == "backend.gave_up":
        return 3, f"backend {backend} failed on every try: {cause}"
    if name == "backend.answer_abandoned":
        errors = event.get("errors") or ["?"]
        contract = event.get("contract", "the contract")
        return 4, f"backend {backend} answers did not fit {contract} twice ({errors[-1]})"
    reason = str(event.get("reason") or "")
    if name == "job.finished" and _TIMED_OUT in reason:
        return 5, f"coaching jobs timed out ({reason}); raise --job-timeout"
    if name == "queue.backlog":
        advice = (
            "start workers" if not event.get("workers") else "raise --max-wall-s or --branch-grace"
        )
        return 6, f"{event.get('message')}: the model is slower than the run; {advice}"
    if name == "coaching.ended" and event.get("state") in ("abandoned", "error"):
        return 7, f"coaching requests ended {event.get('state')}: {reason}"
    return None


def causes(log_paths: Iterable[Path], limit: int = 3) -> list[str]:
    """The distinct causes the logs show, most telling first, at most `limit`."""
    found: dict[str, int] = {}
    for event in _events(log_paths):
        ranked = _cause(event)
        if ranked is not None:
            rank, text = ranked
            found.setdefault(text, rank)
    return sorted(found, key=lambda text: found[text])[:limit]
