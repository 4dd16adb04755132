"""What `gencoach status` shows, read from one scrape of a controller's `/metrics`."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from gencoach.funnel import Funnel


@dataclass
class BackendCalls:
    """One backend's completions, their latency and tokens."""

    ok: float = 0
    failed: float = 0
    seconds: float = 0
    timed: float = 0
    prompt_tokens: float = 0
    completion_tokens: float = 0
    refused_answers: float = 0

    @property
    def mean_s(self) -> float | None:
        """The mean latency of the calls timed, None before the first."""
        return self.seconds / self.timed if self.timed else None


@dataclass
class Queue:
    """One worker queue now."""

    waiting: float = 0
    oldest_s: float = 0
    workers: float = 0


@dataclass
class Snapshot:
    """A controller's state and totals, as `gencoach status` prints them."""

    runs: dict[str, float] = field(default_factory=dict)
    events: dict[str, float] = field(default_factory=dict)
    dead_letters: float = 0
    unhandled: dict[str, float] = field(default_factory=dict)
    loop_lag_s: float = 0
    funnels: dict[str, Funnel] = field(default_factory=dict)
    skips: dict[tuple[str, str], float] = field(default_factory=dict)
    jobs: dict[str, dict[str, float]] = field(default_factory=lambda: defaultdict(dict))
    queues: dict[str, Queue] = field(default_factory=lambda: defaultdict(Queue))
    backends: dict[str, BackendCalls] = field(default_factory=lambda: defaultdict(BackendCalls))


def parse(text: str) -> Snapshot:
    """The snapshot a Prometheus text exposition of gencoach's metrics describes."""
    snap = Snapshot()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            _take(snap, sample.name, sample.labels, sample.value)
    return snap


def _add(table: dict[str, float], key: str, value: float) -> None:
    table[key] = table.get(key, 0) + value


def _take(snap: Snapshot, name: str, labels: dict[str, str], value: float) -> None:
    if name == "gencoach_runs":
        snap.runs[labels["state"]] = value
    elif name == "gencoach_events_total":
        _add(snap.events, labels["outcome"], value)
    elif name == "gencoach_dead_letters":
        snap.dead_letters = value
    elif name == "gencoach_stream_unhandled_entries":
        snap.unhandled[labels["stream"]] = value
    elif name == "gencoach_controller_loop_lag_seconds":
        snap.loop_lag_s = value
    elif name == "gencoach_opportunities_total":
        _opportunity(snap, labels, value)
    elif name == "gencoach_requests_total":
        _row(snap, labels["route"]).arrived(labels["state"], value)
    elif name == "gencoach_jobs_total":
        _add(snap.jobs[labels["kind"]], labels["outcome"], value)
    elif name == "gencoach_queue_jobs":
        snap.queues[labels["queue"]].waiting = value
    elif name == "gencoach_queue_oldest_job_age_seconds":
        snap.queues[labels["queue"]].oldest_s = value
    elif name == "gencoach_queue_workers":
        snap.queues[labels["queue"]].workers = value
    elif name.startswith("gencoach_llm_"):
        _llm(snap.backends[labels["backend"]], name, labels, value)


def _row(snap: Snapshot, row: str) -> Funnel:
    if row not in snap.funnels:
        snap.funnels[row] = Funnel(row)
    return snap.funnels[row]


def _opportunity(snap: Snapshot, labels: dict[str, str], value: float) -> None:
    """Skip reasons; and the requests skipped by the stage limits, which the requests'
    arrivals count among the skipped, are the refused."""
    outcome = labels["outcome"]
    if outcome == "skipped":
        key = (labels["route"], labels["reason"])
        snap.skips[key] = snap.skips.get(key, 0) + value
    elif outcome == "refused":
        funnel = _row(snap, labels["route"])
        funnel.refused += value
        funnel.skipped -= value


def _llm(calls: BackendCalls, name: str, labels: dict[str, str], value: float) -> None:
    if name == "gencoach_llm_calls_total":
        if labels["outcome"] == "ok":
            calls.ok += value
        else:
            calls.failed += value
    elif name == "gencoach_llm_call_duration_seconds_sum" and labels["outcome"] == "ok":
        calls.seconds += value
    elif name == "gencoach_llm_call_duration_seconds_count" and labels["outcome"] == "ok":
        calls.timed += value
    elif name == "gencoach_llm_tokens_total":
        if labels["kind"] == "prompt":
            calls.prompt_tokens += value
        else:
            calls.completion_tokens += value
    elif name == "gencoach_llm_answers_total" and labels["outcome"] == "refused":
        calls.refused_answers += value
