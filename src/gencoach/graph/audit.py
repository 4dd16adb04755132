"""The audit of saved campaigns: what MAGMA-GEN's coaching promises, checked on the saves.

`audit` reads every save under some paths (`gencoach audit PATH...`) and gives an
`AuditReport` of its `Violation`s, by rule (`proof`, `marker`, `alternatives`,
`recovery`). The rules: docs/saves.md ("Checking a campaign").
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gencoach.errors import SaveError
from gencoach.graph.reader import SavedGraph, find_folders, read_save
from gencoach.graph.writer import REQUESTS_FILE
from gencoach.protocol import RECOVERY_POINT, CandidateRecord, single_bad_call

SUCCESS_STATUSES = frozenset({"optimal", "suboptimal"})
COACHED_ROLES = frozenset({"fixed_node", "recovery_node"})


@dataclass(frozen=True)
class Violation:
    """One broken invariant of one save."""

    folder: Path
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.folder}: {self.rule}: {self.message}"


@dataclass(frozen=True)
class AuditReport:
    """What an audit read and what it found."""

    saves: int
    coached: int
    proven_attempts: int
    recovery_nodes: int
    violations: list[Violation]


def audit(paths: Iterable[Path], max_alternatives: int | None = None) -> AuditReport:
    """Audit every save under `paths`; `max_alternatives` overrides the budget saved."""
    folders = sorted({folder for path in paths for folder in find_folders(path)})
    violations: list[Violation] = []
    coached = proven = recovery = 0
    for folder in folders:
        try:
            graph = read_save(folder)
        except SaveError as error:
            violations.append(Violation(folder, "unreadable", str(error)))
            continue
        try:
            requests, budget = _requests(folder)
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            problem = f"{REQUESTS_FILE} is not a request list: {error}"
            violations.append(Violation(folder, "unreadable", problem))
            continue
        save = _SaveAudit(graph, requests, max_alternatives if max_alternatives else budget)
        violations.extend(save.violations())
        coached += sum(1 for c in graph.candidates.values() if c.origin == "coaching")
        proven += len(save.proven)
        recovery += sum(
            1 for c in graph.candidates.values() if c.coaching.coaching_role == "recovery_node"
        )
    return AuditReport(len(folders), coached, proven, recovery, violations)


def _requests(folder: Path) -> tuple[list[dict[str, Any]] | None, int | None]:
    path = folder / REQUESTS_FILE
    if not path.is_file():
        return None, None
    data = json.loads(path.read_text())
    requests = list(data["requests"])
    if not all(isinstance(r, dict) and "request_id" in r and "state" in r for r in requests):
        raise ValueError("each request needs a request_id and a state")
    budget = data.get("max_alternatives_per_situation")
    return requests, budget if isinstance(budget, int) else None


class _SaveAudit:
    """The checks of one save.

    The request checks use `_gencoach/requests.json`, which gencoach writes beside the
    situations; a save without it (MAGMA-GEN's) is checked on its graph alone.
    """

    def __init__(
        self, graph: SavedGraph, requests: list[dict[str, Any]] | None, budget: int | None
    ) -> None:
        self.graph = graph
        self.requests = requests
        self.budget = budget
        self.by_id = {r["request_id"]: r for r in requests or []}
        self.stage_of_attempt = self._attempt_stages()
        self.proven = self._proven_attempts()

    def violations(self) -> Iterator[Violation]:
        """Every broken invariant of the save."""
        for rule, message in (
            *self._proofs(),
            *self._markers(),
            *self._alternatives(),
            *self._recoveries(),
        ):
            yield Violation(self.graph.folder, rule, message)

    def path(self, candidate_id: int) -> Iterator[CandidateRecord]:
        """A candidate and the candidates above it, up to its root."""
        current: int | None = candidate_id
        while current is not None:
            yield self.graph.candidates[current]
            current = self.graph.situations[self.graph.candidate_situation[current]].parent_id

    def _attempt_stages(self) -> dict[int, int]:
        """The stage of each attempt: that of the coached candidate it was made for."""
        stages: dict[int, int] = {}
        for candidate in sorted(
            self.graph.candidates.values(), key=lambda c: c.origin != "coaching"
        ):
            for attempt in candidate.coaching_attempt_ids:
                stages.setdefault(attempt, candidate.stage_id)
        return stages

    def _proven_attempts(self) -> dict[int, int]:
        """Each attempt a successful trajectory of its stage went through, with one such
        successful candidate (as MAGMA-GEN proves every attempt on the path from the root
        to a successful candidate of the attempt's stage, nested corrections included)."""
        proven: dict[int, int] = {}
        for candidate in self.graph.candidates.values():
            if candidate.status not in SUCCESS_STATUSES:
                continue
            for node in self.path(candidate.id):
                for attempt in node.coaching_attempt_ids:
                    if self.stage_of_attempt.get(attempt) == candidate.stage_id:
                        proven.setdefault(attempt, candidate.id)
        return proven

    def _proofs(self) -> Iterator[tuple[str, str]]:
        if self.requests is None:
            return
        owned: set[int] = set()
        for request in self.requests:
            attempts = list(request.get("attempt_ids") or [])
            owned.update(attempts)
            shown = [a for a in attempts if a in self.proven]
            state = request["state"]
            if state == "proven" and not shown:
                yield (
                    "proof",
                    (
                        f"request {request['request_id']} is proven, but no trajectory through its "
                        f"attempts {attempts} reached stage success"
                    ),
                )
            if state != "proven" and shown:
                yield (
                    "proof",
                    (
                        f"request {request['request_id']} is {state}, but attempt {shown[0]} "
                        f"led to stage success (candidate {self.proven[shown[0]]})"
                    ),
                )
        for attempt in sorted(set(self.stage_of_attempt) - owned):
            yield "proof", f"attempt {attempt} belongs to no request"

    def _markers(self) -> Iterator[tuple[str, str]]:
        ours = self.graph.config.producer is not None
        for candidate in self.graph.candidates.values():
            marker = candidate.coaching
            role = marker.coaching_role
            if candidate.origin != "coaching":
                if role is not None:
                    yield "marker", f"candidate {candidate.id} is {role} but not of coaching origin"
                continue
            name = f"coached candidate {candidate.id}"
            if role not in COACHED_ROLES:
                yield "marker", f"{name} has no coaching role"
            if marker.type_coaching is None:
                yield "marker", f"{name} has no type_coaching"
            if not candidate.coaching_attempt_ids:
                yield "marker", f"{name} has no coaching_attempt_ids"
            if not ours:
                continue
            request_id = candidate.coaching_source.get("request_id")
            if not isinstance(request_id, str):
                yield "marker", f"{name} names no request in its coaching_source"
                continue
            if self.requests is None:
                continue
            request = self.by_id.get(request_id)
            if request is None:
                yield "marker", f"{name} names request {request_id}, which the save does not hold"
                continue
            if request.get("type_coaching") != marker.type_coaching:
                yield (
                    "marker",
                    (
                        f"{name} is marked {marker.type_coaching}, its request "
                        f"{request.get('type_coaching')}"
                    ),
                )
            if not set(candidate.coaching_attempt_ids) & set(request.get("attempt_ids") or []):
                yield (
                    "marker",
                    (
                        f"{name} carries attempts {candidate.coaching_attempt_ids}, its request "
                        f"{request.get('attempt_ids')}"
                    ),
                )

    def _alternatives(self) -> Iterator[tuple[str, str]]:
        if self.budget is None:
            return
        places: Counter[str] = Counter()
        for situation in self.graph.situations.values():
            if any(c.origin == "coaching" for c in situation.candidates):
                parent = situation.parent_id
                places["the run's start" if parent is None else f"candidate {parent}"] += 1
        for place, count in sorted(places.items()):
            if count > self.budget:
                yield (
                    "alternatives",
                    (
                        f"{count} coached alternatives start from {place}; "
                        f"the budget is {self.budget}"
                    ),
                )

    def _recoveries(self) -> Iterator[tuple[str, str]]:
        for request in self.requests or []:
            diagnosis = request.get("diagnosis")
            offered = request.get("offered_points") or []
            if request.get("kind") != "failure" or diagnosis is None or not offered:
                continue
            selected = self.graph.candidates.get(diagnosis["step_id"])
            if selected is None or not single_bad_call(selected.output, selected.execution):
                continue
            followed = any(link.kind == "next" for link in selected.links)
            # Its own terminal: the call ended the stage, recovery starts after its status.
            if not followed and selected.id != request.get("candidate_id"):
                continue
            if RECOVERY_POINT not in offered:
                after = "followed by its feedback" if followed else "that ended its stage"
                yield (
                    "recovery",
                    (
                        f"request {request['request_id']} blamed candidate {selected.id}, a single "
                        f"bad call {after}, but was offered only {offered}"
                    ),
                )
