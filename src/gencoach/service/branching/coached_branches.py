"""Coached branches: a corrected request becomes a recorded alternative and a branch order.

`BranchRecorder` allocates each proposal's attempt, records the agent's reinjected answer
as a new situation linked `alternative` to the anchor's parent (the original branch is
kept) with one candidate of origin `coaching`, marks the nodes and publishes the order;
`anchor_of` finds where a proposal's branch starts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Final, Literal

from redis.asyncio import Redis

from gencoach.constants import ORDER_FIELD, Keys
from gencoach.metrics import MetricsRecorder
from gencoach.metrics.catalog import BRANCH_ORDERS
from gencoach.protocol import (
    RECOVERY_POINT,
    AgentOutput,
    BranchAnchor,
    BranchOrder,
    CandidateCreated,
    CoachingMarker,
    CoachingProposal,
    JsonObject,
    SituationCreated,
    coached_input,
)
from gencoach.service.coaching.requests import CoachingRequest
from gencoach.service.store.graphstore import (
    ALTERNATIVES,
    ATTEMPTS,
    MARKERS,
    ORDERS,
    SOURCES,
    GraphStore,
)
from gencoach.service.store.nodes import RunGraph, StoredSituation, as_text
from gencoach.service.store.trajectory import built_after, recovery_situation

ALTERNATIVES_SCRIPT: Final = resources.files("gencoach.service").joinpath("lua/alternatives.lua")
ORDER_SCRIPT: Final = resources.files("gencoach.service").joinpath("lua/coached_order.lua")

# Nodes gencoach records itself carry seqs from here up: far above any generator's.
OWN_SEQ_BASE = 1 << 40
# The generator ids of the coached nodes gencoach records begin so (`node_ids`).
COACHED_PREFIX: Final = "coach:"


@dataclass(frozen=True)
class Anchor:
    """Where a proposal restarts: the situation, and the candidate it replaces or follows."""

    kind: Literal["replacement", "recovery"]
    situation: StoredSituation
    source_candidate: int


def anchor_of(graph: RunGraph, request: CoachingRequest, point: str) -> Anchor | None:
    """The anchor of a reinjection point: the selected step's situation for `replacement`,
    for `recovery` the situation after its failure feedback (`GraphStore.add_following`
    puts it in a lineage) or the one built after a call that ended its stage."""
    selected = request.selected_id
    candidate = graph.candidates.get(selected)
    if candidate is None:
        return None
    if point != RECOVERY_POINT:
        return Anchor("replacement", graph.situations[candidate.situation_id], selected)
    recovery = recovery_situation(graph, selected)
    return Anchor("recovery", recovery, selected) if recovery is not None else None


def proposal_key(request_id: str, point: str) -> str:
    """A proposal's name in its run's hashes: the claim holding its place in its
    situation's exploration budget, and its field in the attempts hash (its attempt id;
    `#<id>` names it back, `attempt_owner` splits it)."""
    return f"{request_id}|{point}"


def node_ids(request: CoachingRequest, point: str) -> tuple[str, str]:
    """The generator-style ids of the coached situation and candidate of a proposal."""
    base = f"{COACHED_PREFIX}{request.request_id}:{point}"
    return f"{base}:s", f"{base}:c"


def coached_request_id(candidate_id: str) -> str | None:
    """The request a coached candidate was made for, read from its id (`node_ids`); None
    for any other candidate."""
    if not (candidate_id.startswith(COACHED_PREFIX) and candidate_id.endswith(":c")):
        return None
    request_id, _, _ = candidate_id[len(COACHED_PREFIX) : -len(":c")].rpartition(":")
    return request_id or None


class BranchRecorder:
    """Allocates attempts, records coached nodes and their markers, publishes orders.

    Everything is keyed by the request and the reinjection point, so a crash or a retry
    never makes two branches of one proposal: the attempt id is allocated once, the nodes
    are recorded through the graph's exactly-once apply script with seqs derived from the
    attempt id, an answer already recorded is reused rather than asked again, and the
    order is published once, in the same step as its "published" flag.
    """

    def __init__(
        self, client: Redis, keys: Keys, store: GraphStore, metrics: MetricsRecorder | None = None
    ) -> None:
        self.client = client
        self.keys = keys
        self.store = store
        self.metrics = metrics or MetricsRecorder()
        self._alternatives = client.register_script(ALTERNATIVES_SCRIPT.read_text())
        self._order = client.register_script(ORDER_SCRIPT.read_text())

    async def attempt_id(self, request: CoachingRequest, point: str) -> tuple[int, bool]:
        """The attempt id of a proposal, allocated once, and whether it was drawn now: a
        fresh id is drawn and kept only if the proposal has none yet (a proposal reinjected
        again draws one it does not keep: ids are unique, not dense). Its owner is written
        in the same round trip: a `#<id>` entry for an id not kept names nobody's node, and
        is never read. A branch is recorded under its attempt only: none is, under an id
        drawn now."""
        field = proposal_key(request.request_id, point)
        key = self.keys.run(request.run_id, ATTEMPTS)
        fresh = int(await self.client.incr(self.keys.attempt_counter))
        pipe = self.client.pipeline(transaction=False)
        pipe.hsetnx(key, field, fresh)
        pipe.hset(key, f"#{fresh}", field)
        kept, _ = await pipe.execute()
        if kept:
            return fresh, True
        return int(await self.client.hget(key, field) or fresh), False

    async def attempt_owner(self, run_id: str, attempt: int) -> tuple[str, str] | None:
        """The request id and reinjection point an attempt of this run was made for."""
        owner = await self.client.hget(self.keys.run(run_id, ATTEMPTS), f"#{attempt}")
        if owner is None:
            return None
        request_id, _, point = as_text(owner).rpartition("|")
        return request_id, point

    async def claim_alternative(
        self, run_id: str, claim: str, situation: StoredSituation, budget: int
    ) -> tuple[bool, int]:
        """Take a place for a coached alternative of `situation` under the exploration
        budget, atomically: whether it was granted, and the places then taken there.

        Alternatives of a situation start from its parent candidate (root situations:
        from the run's start), so its coached siblings share the budget. A claim is
        granted again to the same `claim`, so a retry or a crash never counts twice.
        """
        group = str(situation.parent_id) if situation.parent_id is not None else "root"
        granted, count = await self._alternatives(
            keys=[self.keys.run(run_id, ALTERNATIVES)], args=["claim", claim, group, budget]
        )
        return bool(granted), int(count)

    async def next_intervention(self, run_id: str) -> int:
        """A number for a person's intervention on the run, never given twice."""
        return int(await self.client.hincrby(self.keys.run(run_id, ALTERNATIVES), "people", 1))

    async def release_alternative(self, run_id: str, claim: str) -> None:
        """Give back a claimed place whose alternative was never recorded."""
        await self._alternatives(
            keys=[self.keys.run(run_id, ALTERNATIVES)], args=["release", claim, "", 0]
        )

    async def recorded_answer(self, run_id: str, candidate_gen_id: str) -> AgentOutput | None:
        """The coached candidate already recorded for this proposal, as the agent answered."""
        storage_id = await self.store.storage_id(run_id, candidate_gen_id)
        if storage_id is None:
            return None
        graph = await self.store.lineage(run_id, storage_id)
        if graph is None:
            return None
        candidate = graph.candidates[storage_id]
        return AgentOutput(
            request_id=candidate.candidate_id,
            source_id=graph.situations[candidate.situation_id].input.id,
            candidate_index=0,
            status=candidate.response_status,
            memory=candidate.memory,
            internal_steps=candidate.internal_steps,
            output=candidate.output,
            error=candidate.error,
        )

    async def record(
        self,
        request: CoachingRequest,
        graph: RunGraph,
        anchor: Anchor,
        proposal: CoachingProposal,
        answer: AgentOutput,
        attempt: int,
    ) -> BranchOrder:
        """Record the coached situation, candidate and markers; publish the order once."""
        run_id = request.run_id
        situation_id, candidate_id = node_ids(request, proposal.reinjection_point_id)
        parent = anchor.situation.parent_id
        parent_gen = graph.candidates[parent].candidate_id if parent is not None else None
        coached = coached_input(anchor.situation.input, proposal.extra_keys)
        seq = OWN_SEQ_BASE + 2 * attempt
        situation = SituationCreated(
            run_id=run_id,
            seq=seq,
            situation_id=situation_id,
            parent_candidate_id=parent_gen,
            link="alternative",
            stage=anchor.situation.stage,
            input=coached,
            active_errors=anchor.situation.active_errors,
            coaching_attempt_ids=[attempt],
        )
        candidate = CandidateCreated(
            run_id=run_id,
            seq=seq + 1,
            candidate_id=candidate_id,
            situation_id=situation_id,
            response_status=answer.status,
            output=answer.output,
            error=answer.error,
            memory=answer.memory,
            internal_steps=answer.internal_steps,
            origin="coaching",
            coaching_attempt_ids=[attempt],
        )
        results = await self.store.apply([situation, candidate], own=True)
        refused = [result.reason for result in results if result.outcome == "err"]
        if refused:
            raise BranchRefused(f"the coached branch was not recorded: {refused[0]}")
        source: JsonObject = {
            "request_id": request.request_id,
            "source_node": graph.candidates[anchor.source_candidate].candidate_id,
            "origin": "human" if request.human else "automatic",
            "decision_source": proposal.decision_source,
        }
        coached_id = results[1].storage_id  # None when recorded before (a retry)
        if coached_id is None:
            coached_id = await self.store.storage_id(run_id, candidate_id)
            assert coached_id is not None
        markers = await self._markers(request, graph, anchor, coached_id)
        order = BranchOrder(
            branch_id=f"{request.request_id}|{proposal.reinjection_point_id}",
            run_id=run_id,
            anchor=BranchAnchor(
                kind=anchor.kind,
                situation_id=anchor.situation.situation_id,
                after_candidate_id=built_after(anchor.situation),
            ),
            situation_id=situation_id,
            candidate_id=candidate_id,
            input=coached,
            candidate=answer,
            coaching=markers[coached_id],
            attempt_id=attempt,
        )
        await self._publish(order, request.route, markers, coached_id, source)
        return order

    async def _markers(
        self, request: CoachingRequest, graph: RunGraph, anchor: Anchor, coached_id: int
    ) -> dict[int, CoachingMarker]:
        """The markers of the coached candidate, the decision it corrects and the terminal
        one, by storage id."""
        run_id = request.run_id
        existing = await self.store.markers(run_id, [anchor.source_candidate, request.candidate_id])
        faulty = existing.get(anchor.source_candidate, CoachingMarker())
        replacement, faulty = correction_markers(faulty, request.type_coaching, anchor.kind)
        updates = {coached_id: replacement}
        updates[anchor.source_candidate] = _consumed(faulty, request.type_coaching)
        terminal = updates.get(request.candidate_id) or existing.get(request.candidate_id)
        updates[request.candidate_id] = _consumed(
            terminal or CoachingMarker(), request.type_coaching
        )
        return updates

    async def _publish(
        self,
        order: BranchOrder,
        route: str,
        markers: dict[int, CoachingMarker],
        coached_id: int,
        source: JsonObject,
    ) -> None:
        """Write the markers and the coached candidate's source, and publish the order
        once, in one step (`lua/coached_order.lua`)."""
        run_id = order.run_id
        keys = [self.keys.run(run_id, part) for part in (MARKERS, SOURCES, ORDERS)] + [
            self.keys.branches(run_id)
        ]
        args: list[str | int] = [
            order.branch_id,
            ORDER_FIELD,
            order.model_dump_json(),
            coached_id,
            json.dumps(source),
        ]
        for cid, marker in markers.items():
            args += [cid, marker.model_dump_json()]
        if await self._order(keys=keys, args=args):
            self.metrics.inc(BRANCH_ORDERS, route)


DIAGNOSIS_FOCUSES = frozenset({"diagnosis", "suboptimal_diagnosis"})


def applies_trajectory_diagnostic(type_coaching: str) -> bool:
    """Whether a correction of this type validates the decisions before it: only a diagnosis
    (`<event>:diagnosis`, `finish_suboptimal:suboptimal_diagnosis`), never a format fix or a
    text rewrite (MAGMA-GEN's `coaching_type_applies_trajectory_diagnostic`)."""
    return type_coaching.partition(":")[2] in DIAGNOSIS_FOCUSES


def correction_markers(
    faulty: CoachingMarker, type_coaching: str, kind: str
) -> tuple[CoachingMarker, CoachingMarker]:
    """The coached candidate's marker and the faulty decision's new one, for a correction of
    `type_coaching` reinjected at a `replacement` or `recovery` point.

    As MAGMA-GEN (`AgentCoachingMixin`): only a diagnosis-based correction validates the
    trajectory prefix, marking the faulty decision; a replacement (never a recovery node)
    is marked whenever its faulty decision carries the mark, from this correction or an
    earlier one.
    """
    if kind == "replacement":
        faulty = faulty.model_copy(update={"diagnosed_as_faulty": True})
    if applies_trajectory_diagnostic(type_coaching):
        faulty = faulty.model_copy(update={"trajectory_diagnostic_applied": True})
    validated = kind == "replacement" and faulty.trajectory_diagnostic_applied
    marker = CoachingMarker(
        type_coaching=type_coaching,
        coaching_role="recovery_node" if kind == "recovery" else "fixed_node",
        trajectory_diagnostic_applied=validated,
    )
    return marker, faulty


def _consumed(marker: CoachingMarker, type_coaching: str) -> CoachingMarker:
    if type_coaching in marker.diagnostic_types:
        return marker
    return marker.model_copy(update={"diagnostic_types": [*marker.diagnostic_types, type_coaching]})


class BranchRefused(Exception):  # noqa: N818 - an answer, not a failure
    """The run's graph refused a coached branch's nodes (the run finished or was saved
    after the reinjection began): the request ends with the reason, nothing to fix."""
