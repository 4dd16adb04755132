"""Branch orders (gencoach → generator): execute a coached decision from a saved situation."""

from __future__ import annotations

from typing import Literal

from gencoach.protocol.agent import AgentInput, AgentOutput
from gencoach.protocol.base import ContractModel, NonEmptyStr, decode_json
from gencoach.protocol.graph import CoachingMarker


class BranchAnchor(ContractModel):
    """The situation a coached branch restarts from, and how (which reinjection point).

    A `recovery` after a call that ended its stage restarts from a situation the generator
    never reported (`after:<candidate>`, built from the terminal status as MAGMA-GEN does):
    `after_candidate_id` names that candidate; restore the state right after its execution,
    with its stage going on."""

    kind: Literal["replacement", "recovery"]
    situation_id: NonEmptyStr
    after_candidate_id: NonEmptyStr | None = None


class BranchOrder(ContractModel):
    """Order to restore a situation, execute the reinjected candidate and continue the branch."""

    type: Literal["branch.order"] = "branch.order"
    branch_id: NonEmptyStr
    run_id: NonEmptyStr
    anchor: BranchAnchor
    situation_id: NonEmptyStr
    candidate_id: NonEmptyStr
    input: AgentInput
    candidate: AgentOutput
    coaching: CoachingMarker
    attempt_id: int


class RunSettled(ContractModel):
    """gencoach's answer to a generator that asked whether its run is settled: through the
    generator's event `through_seq`, no coaching request of the run can still produce a
    branch order. Written on the run's branch stream after every order it published."""

    type: Literal["run.settled"] = "run.settled"
    run_id: NonEmptyStr
    through_seq: int


def parse_branch_order(data: object) -> BranchOrder:
    """Parse a decoded branch order, or raise ContractError."""
    return BranchOrder.parse(data)


def parse_branch_order_json(raw: str | bytes) -> BranchOrder:
    """Parse a branch order from its JSON text, or raise ContractError."""
    return BranchOrder.parse(decode_json(raw, "BranchOrder"))
