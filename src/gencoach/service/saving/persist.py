"""Persistence: a run's graph in Redis becomes a MAGMA-GEN 2.0 save folder."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from redis.asyncio import Redis

from gencoach.__about__ import __version__
from gencoach.constants import Keys
from gencoach.errors import SaveError
from gencoach.graph import (
    CONFIG_FILE,
    REQUESTS_FILE,
    ScoredCandidate,
    descendant_scores,
    outcome_of,
    run_folder_name,
    write_save,
)
from gencoach.graph.files import write_json_atomic
from gencoach.graph.writer import OWN_DIR
from gencoach.limits import StageLimits
from gencoach.protocol import (
    GRAPH_FORMAT_VERSION,
    CandidateRecord,
    CoachingLog,
    CoachingMarker,
    JsonObject,
    Producer,
    RunConfig,
    SituationLink,
    SituationRecord,
    StageEnd,
)
from gencoach.runtime.logs import get_logger
from gencoach.service.coaching.requests import REQUESTS
from gencoach.service.saving.describe import describe_task
from gencoach.service.store.graphstore import GraphParts, GraphStore, graph_from_parts
from gencoach.service.store.nodes import RunGraph, StoredCandidate, StoredExecution

if TYPE_CHECKING:
    from gencoach.config import Settings
    from gencoach.service.coaching.budgets import Budgets

log = get_logger("persist")


def saved_status(execution: StoredExecution | None, candidate: StoredCandidate) -> str:
    """The candidate status a save records, as MAGMA-GEN's: a stage end decides it when
    there is one; an executed decision whose stage goes on is `finished`."""
    if candidate.response_status == "error" or candidate.invalid_reason is not None:
        return "invalid"
    if execution is None:
        return "ongoing"
    status = status_for_stage_end(execution.stage_end) or execution.status
    return "finished" if status == "ongoing" else status


def status_for_stage_end(stage_end: StageEnd | None) -> str | None:
    """The status a stage end implies: optimal, suboptimal, or error for any failure."""
    if stage_end is None:
        return None
    if stage_end.event != "success":
        return "error"
    return "optimal" if stage_end.state == "optimal" else "suboptimal"


def build_records(graph: RunGraph) -> list[SituationRecord]:
    """Every situation of the run as a save record, candidates scored, in id order."""
    statuses = {
        cid: saved_status(graph.executions.get(cid), candidate)
        for cid, candidate in graph.candidates.items()
    }
    scoring = {
        cid: ScoredCandidate(
            stage_id=graph.situations[candidate.situation_id].stage.id,
            outcome=outcome_of(statuses[cid]),
            next_situations=[sid for sid, kind in graph.links.get(cid, []) if kind == "next"],
            resume=candidate.kind == "simulation_resume",
        )
        for cid, candidate in graph.candidates.items()
    }
    scores = descendant_scores(graph.members, scoring)
    records = []
    for sid in sorted(graph.situations):
        situation = graph.situations[sid]
        candidates = []
        for cid in graph.members.get(sid, []):
            candidate = graph.candidates[cid]
            execution = graph.executions.get(cid)
            error = candidate.reported_error()
            candidates.append(
                CandidateRecord(
                    id=cid,
                    parent_id=situation.parent_id,
                    stage_id=situation.stage.id,
                    kind=candidate.kind,
                    response_status="error" if error is not None else "completed",
                    output=candidate.output if error is None else None,
                    error=error,
                    internal_steps=candidate.internal_steps,
                    execution=execution.execution if execution is not None else {},
                    status=statuses[cid],  # type: ignore[arg-type]
                    # An invalid answer is never executed (MAGMA-GEN: no step summary).
                    execution_finished=execution is not None and statuses[cid] != "invalid",
                    score=scores.get(cid, {}),
                    coaching=graph.markers.get(cid, CoachingMarker()),
                    coaching_source=graph.sources.get(cid, {}),
                    coaching_attempt_ids=sorted(set(candidate.coaching_attempt_ids)),
                    origin=candidate.origin,
                    links=[
                        SituationLink(situation_id=child, kind=kind)
                        for child, kind in graph.links.get(cid, [])
                    ],
                )
            )
        records.append(
            SituationRecord(
                id=sid,
                stage_id=situation.stage.id,
                parent_id=situation.parent_id,
                input=situation.input,
                candidates=candidates,
            )
        )
    return records


def build_config(graph: RunGraph, agent_id: str, agent_version: str) -> RunConfig:
    """The run's `config.json` content, before `export_complete` is set."""
    started = graph.started
    errors = Counter(
        error.code for situation in graph.situations.values() for error in situation.active_errors
    )
    invalid = sum(1 for c in graph.candidates.values() if c.invalid_reason is not None)
    return RunConfig(
        run_id=graph.run_id,
        scenario=started.scenario,
        target=started.target,
        target_kind=started.target_kind,
        generator_version=GRAPH_FORMAT_VERSION,
        export_complete=False,
        agent_id=agent_id,
        agent_version=agent_version,
        roots=graph.roots,
        env_options=started.env_options,
        task_description=describe_task(graph),
        error_statistics={
            "active_errors": dict(sorted(errors.items())),
            "invalid_answers": invalid,
        },
        producer=Producer(package="gencoach", version=__version__, started_at=graph.started_at),
        single_agent=started.single_agent,
    )


class Persister:
    """Writes runs' saves under the output dir and lets saved runs' keys expire."""

    def __init__(
        self,
        store: GraphStore,
        limits: StageLimits,
        output_dir: Path,
        saved_ttl_s: int,
        budgets: Budgets | None = None,
    ) -> None:
        self.store = store
        self.limits = limits
        self.output_dir = output_dir
        self.saved_ttl_s = saved_ttl_s
        self.budgets = budgets

    def folder_for(self, run_id: str) -> Path:
        """Where a run's save goes."""
        return self.output_dir / run_folder_name(run_id)

    async def save(self, run_id: str) -> Path | None:
        """Write the run's save (again, whole); mark a finished run saved. None if unknown.

        The graph is read from Redis in batches; building the records and writing the
        files happen in a worker thread, so the event loop (the API, the streams) keeps
        answering while a large run is saved.
        """
        parts = await self.store.read_parts(run_id)
        if parts is None:
            return None
        agent = await self.store.agent_identity(run_id)
        logs = await self.store.raw_logs(run_id)
        requests = await self.store.scan_part(run_id, REQUESTS)
        budget = (
            (await self.budgets.current()).max_alternatives_per_situation if self.budgets else None
        )
        folder = self.folder_for(run_id)
        written = await anyio.to_thread.run_sync(
            _write_run, folder, run_id, parts, logs, agent, _requests_file(requests, budget)
        )
        if written.state in ("finished", "saved"):
            also = await self.limits.run_keys(run_id)
            await self.store.mark_saved(run_id, str(folder), self.saved_ttl_s, also)
        log.info(
            "run.saved",
            run_id=run_id,
            folder=str(folder),
            situations=written.situations,
            candidates=written.candidates,
        )
        return folder

    async def save_requests(self, run_id: str) -> bool:
        """Write a saved run's requests file again (its requests moved after its save);
        whether there was a save to write it into. The rest of the save is left as it is,
        complete: a reader never finds it half written."""
        folder = self.folder_for(run_id)
        requests = await self.store.scan_part(run_id, REQUESTS)
        budget = (
            (await self.budgets.current()).max_alternatives_per_situation if self.budgets else None
        )
        return await anyio.to_thread.run_sync(
            _rewrite_requests, folder, _requests_file(requests, budget)
        )


def _rewrite_requests(folder: Path, requests: JsonObject) -> bool:
    if not (folder / CONFIG_FILE).is_file() or (folder / OWN_DIR).is_symlink():
        return False
    (folder / OWN_DIR).mkdir(exist_ok=True)
    write_json_atomic(folder / REQUESTS_FILE, requests)
    return True


async def save_run(settings: Settings, redis_url: str, run_id: str) -> Path | None:
    """Save one run now, as `gencoach save` does beside a running controller (a finished
    run is also marked saved); None for an unknown run. Imports no server code."""
    client = Redis.from_url(redis_url)
    try:
        keys = Keys(settings.redis.key_prefix)
        store = GraphStore(client, keys)
        limits = StageLimits(client, keys)
        persister = Persister(store, limits, settings.output_dir, settings.controller.saved_ttl_s)
        return await persister.save(run_id)
    finally:
        await client.aclose()


@dataclass(frozen=True)
class _Written:
    """What a save wrote: the run's state when it was read, and its node counts."""

    state: str
    situations: int
    candidates: int


def _requests_file(requests: dict[bytes, bytes], budget: int | None) -> JsonObject:
    """`_gencoach/requests.json`: the run's requests as stored, oldest first, and the
    exploration budget in force when it was saved."""
    found = [json.loads(value) for value in requests.values()]
    found.sort(key=lambda r: (r["history"][0]["at"] if r.get("history") else 0, r["request_id"]))
    return {"max_alternatives_per_situation": budget, "requests": found}


def _write_run(
    folder: Path,
    run_id: str,
    parts: GraphParts,
    logs: list[bytes],
    agent: tuple[str, str],
    requests: JsonObject,
) -> _Written:
    """Build a run's save from its stored fields and write it (blocking: run in a thread)."""
    graph = graph_from_parts(run_id, parts)
    _check_owner(folder, run_id)
    records = build_records(graph)
    config = build_config(graph, *agent)
    coaching_logs = [CoachingLog.model_validate_json(item) for item in logs]
    write_save(folder, config, records, coaching_logs, requests)
    _check_complete(folder, run_id)
    return _Written(graph.state, len(records), len(graph.candidates))


def _check_owner(folder: Path, run_id: str) -> None:
    """Refuse to write into a folder that holds another run's save."""
    try:
        found = json.loads((folder / CONFIG_FILE).read_text()).get("run_id")
    except (OSError, ValueError, AttributeError):
        return  # no save there yet (or not one gencoach can read): nothing to protect
    if found is not None and found != run_id:
        raise SaveError(folder, f"the folder holds the save of run {found!r}, not {run_id!r}")


def _check_complete(folder: Path, run_id: str) -> None:
    """A run is marked saved only once its folder is on disk, complete."""
    try:
        config = json.loads((folder / CONFIG_FILE).read_text())
    except (OSError, ValueError) as error:
        raise SaveError(folder, f"run {run_id!r}: the save is not readable: {error}") from None
    if config.get("run_id") != run_id or config.get("export_complete") is not True:
        raise SaveError(folder, f"run {run_id!r}: the save on disk is not complete")
