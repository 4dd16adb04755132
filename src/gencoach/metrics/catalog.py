"""Every counter and histogram gencoach records: its name, help text and labels.

Label values come from closed sets (event types, routes, states, job kinds, outcomes,
reason codes) or from the config (backend names), never from runs, so the number of
series stays bounded however long the service runs.
"""

from __future__ import annotations

from dataclasses import dataclass

# Seconds: from an instant python backend to a slow local model.
LATENCY_BUCKETS: tuple[float, ...] = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


@dataclass(frozen=True)
class Counter:
    """A count that only goes up. `name` ends in `_total`."""

    name: str
    help: str
    labels: tuple[str, ...]


@dataclass(frozen=True)
class Histogram:
    """Observations (seconds) counted into cumulative buckets, with their sum and count."""

    name: str
    help: str
    labels: tuple[str, ...]
    buckets: tuple[float, ...] = LATENCY_BUCKETS


Family = Counter | Histogram

EVENTS = Counter(
    "gencoach_events_total",
    "Events intake took from the events stream, by type and outcome "
    "(applied, duplicate, parked, dead_lettered).",
    ("type", "outcome"),
)
OPPORTUNITIES = Counter(
    "gencoach_opportunities_total",
    "Coaching opportunities by route and outcome (admitted, skipped, refused by the "
    "stage limits), with the reason code of a skip or refusal.",
    ("route", "outcome", "reason"),
)
REQUESTS = Counter(
    "gencoach_requests_total",
    "Coaching requests arriving in each state, by route; the final states are skipped, "
    "declined, abandoned, error, proven and unproven.",
    ("route", "state"),
)
JOBS = Counter(
    "gencoach_jobs_total",
    "Worker jobs by kind (diagnosis, repair, rewrite) and outcome.",
    ("kind", "outcome"),
)
JOB_SECONDS = Histogram(
    "gencoach_job_duration_seconds",
    "How long worker jobs took, by kind.",
    ("kind",),
)
LLM_CALLS = Counter(
    "gencoach_llm_calls_total",
    "Completions asked of each backend, by outcome (ok, unavailable, refused, truncated, error).",
    ("backend", "outcome"),
)
LLM_SECONDS = Histogram(
    "gencoach_llm_call_duration_seconds",
    "How long each backend took to answer (retries included), by outcome.",
    ("backend", "outcome"),
)
LLM_TOKENS = Counter(
    "gencoach_llm_tokens_total",
    "Tokens each backend reported, by kind (prompt, completion).",
    ("backend", "kind"),
)
LLM_ANSWERS = Counter(
    "gencoach_llm_answers_total",
    "Answers checked against their contract, by backend and outcome (accepted, refused).",
    ("backend", "outcome"),
)
REINJECTIONS = Counter(
    "gencoach_reinjections_total",
    "Corrections reinjected through the agent, one per proposal, by route and outcome "
    "(branched, no_anchor, agent_error, budget_spent, run_closed).",
    ("route", "outcome"),
)
BRANCH_ORDERS = Counter(
    "gencoach_branch_orders_total",
    "Branch orders published to the generators, by route.",
    ("route",),
)
PROOFS = Counter(
    "gencoach_proofs_total",
    "Outcomes of executed coached branches, by route (proven, unproven).",
    ("route", "outcome"),
)

FAMILIES: tuple[Family, ...] = (
    EVENTS,
    OPPORTUNITIES,
    REQUESTS,
    JOBS,
    JOB_SECONDS,
    LLM_CALLS,
    LLM_SECONDS,
    LLM_TOKENS,
    LLM_ANSWERS,
    REINJECTIONS,
    BRANCH_ORDERS,
    PROOFS,
)
