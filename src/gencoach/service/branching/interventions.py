"""Human interventions: a person's diagnosis and decision, reinjected like a correction.

A person names a candidate, says what was wrong and which decision was expected; the
decision is reinjected as `replace_decision` at the candidate's input, type
`failure:diagnosis`, with `coaching_source.origin: "human"`. It skips the pending and
unproven limits but not the situation's exploration budget.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import model_validator

from gencoach.config import Settings
from gencoach.protocol import (
    REPLACEMENT_POINT,
    AgentDecision,
    CoachingDiagnosis,
    CoachingProposal,
    ContractModel,
    FieldError,
    NonEmptyStr,
    ReplaceDecision,
)
from gencoach.protocol.jobs import Diagnosis
from gencoach.runtime.logs import get_logger
from gencoach.service.branching.coached_branches import BranchRecorder, proposal_key
from gencoach.service.branching.reinjection import Reinjector
from gencoach.service.coaching.budgets import Budgets
from gencoach.service.coaching.decider import PersonDecided
from gencoach.service.coaching.requests import AdmissionTerms, CoachingRequest, RequestStore
from gencoach.service.store.graphstore import GraphStore

log = get_logger("interventions")

HUMAN_TYPE = "failure:diagnosis"


class Intervention(ContractModel):
    """What a person sends: the candidate, the diagnosis and the decision expected instead."""

    candidate_id: NonEmptyStr
    diagnosis: CoachingDiagnosis
    decision: AgentDecision

    @model_validator(mode="after")
    def _one_kind_of_decision(self) -> Intervention:
        says, acts = bool(self.decision.say), bool(self.decision.tool_calls)
        if says == acts:
            raise FieldError("decision", "give exactly one of a non-empty `say` or tool calls")
        return self


class InterventionRefused(Exception):  # noqa: N818 - answered as an HTTP status, not raised on
    """The intervention cannot be taken; `status` is the HTTP status to answer with."""

    def __init__(self, status: int, reason: str) -> None:
        self.status = status
        self.reason = reason
        super().__init__(reason)


class Interventions:
    """Turns interventions into corrected human requests."""

    def __init__(
        self,
        store: GraphStore,
        requests: RequestStore,
        budgets: Budgets,
        recorder: BranchRecorder,
        settings: Callable[[], Settings],
        reinjector: Reinjector,
    ) -> None:
        self.store = store
        self.requests = requests
        self.budgets = budgets
        self.recorder = recorder
        self.settings = settings
        self.reinjector = reinjector

    async def submit(self, run_id: str, intervention: Intervention) -> CoachingRequest:
        """Admit the intervention and start reinjecting it; InterventionRefused if it cannot."""
        state = await self.store.state(run_id)
        if state is None:
            raise InterventionRefused(404, f"unknown run {run_id!r}")
        if state != "active":
            raise InterventionRefused(409, f"run {run_id} is {state}: no more branches")
        gen_id = intervention.candidate_id
        candidate_id = await self.store.storage_id(run_id, gen_id)
        graph = await self.store.lineage(run_id, candidate_id) if candidate_id is not None else None
        if candidate_id is None or graph is None:
            raise InterventionRefused(404, f"run {run_id} has no candidate {gen_id!r}")
        situation = graph.situations[graph.candidates[candidate_id].situation_id]
        number = await self.recorder.next_intervention(run_id)
        request_id = f"{run_id}:{candidate_id}:human-{number}"
        budget = (await self.budgets.current()).max_alternatives_per_situation
        granted, taken = await self.recorder.claim_alternative(
            run_id, proposal_key(request_id, REPLACEMENT_POINT), situation, budget
        )
        if not granted:
            raise InterventionRefused(
                409,
                f"the exploration budget of candidate {gen_id}'s situation is spent: "
                f"{taken} of {budget} alternatives (coaching.max_alternatives_per_situation)",
            )
        request = CoachingRequest(
            request_id=request_id,
            run_id=run_id,
            route="failure",
            kind="failure",
            type_coaching=HUMAN_TYPE,
            candidate_id=candidate_id,
            candidate_gen_id=gen_id,
            stage_id=situation.stage.id,
            human=True,
            state="opportunity",
            diagnosis=Diagnosis(
                step_id=candidate_id,
                decision_index=1,
                explanation=intervention.diagnosis.explanation,
                expected_decision=intervention.diagnosis.expected_decision,
                rule="human",
            ),
            proposals=[
                CoachingProposal(
                    reinjection_point_id=REPLACEMENT_POINT,
                    extra_keys=ReplaceDecision(
                        decision=intervention.decision, decision_source="human"
                    ).model_dump(mode="json"),
                )
            ],
        ).moved("opportunity", "human intervention")
        await self.requests.create(request)
        terms = AdmissionTerms(await self.budgets.current(), self.settings().coaching.lease_s)
        applied = await self.requests.apply(request, PersonDecided(), terms)
        if not applied.stored:  # its id is new: no other writer can have moved it
            raise InterventionRefused(409, f"request {request.request_id} already exists")
        log.info("intervention.accepted", run_id=run_id, request_id=request.request_id)
        self.reinjector.submit(applied.request, written=True)
        return applied.request
