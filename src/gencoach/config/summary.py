"""What `gencoach serve` prints at start-up: where it listens and what it will do."""

from __future__ import annotations

from pathlib import Path

from gencoach.config.redaction import mask_password
from gencoach.config.settings import Settings

OFF_REASON = "coaching.enabled is false: runs are recorded and saved, nothing is coached"


def startup_summary(settings: Settings, redis_url: str) -> list[str]:
    """One line per fact an operator checks first: Redis, API, agents, coaching, output."""
    api = settings.api
    if api.token is not None:
        protection = f"a token protects changes ({api.token_source})"
    else:
        protection = "no token: reachable from this machine only"
    redis_origin = " (embedded, stopped on exit)" if settings.redis.url == "embedded" else ""
    prefix = settings.redis.key_prefix
    coaching = settings.coaching
    lines = [
        f"redis:    {mask_password(redis_url)}{redis_origin}, key prefix {prefix}",
        f"api:      http://{api.host}:{api.port}/ ({protection})",
        f"metrics:  http://{api.host}:{api.port}/metrics (Prometheus); "
        "`gencoach status` shows them",
        f"agents:   runs may name agents under {', '.join(settings.agents) or 'none'}",
    ]
    if not coaching.enabled:
        lines.append(f"coaching: off ({OFF_REASON})")
    elif not settings.backends:
        lines.append("coaching: on, but no backend is configured")
    else:
        routes = [name for name, on in coaching.routes.model_dump().items() if on]
        lines.append(f"coaching: on, routes {', '.join(routes) or 'none (all switched off)'}")
    for name, backend in settings.backends.items():
        model = f", model {backend.default_model}" if backend.default_model else ""
        openai = backend.type == "openai"
        mode = f", structured output {backend.structured_output}" if openai else ""
        lines.append(f"backend:  {name}: {backend.type} {backend.endpoint}{model}{mode}")
    lines += [
        f"budgets:  per stage {coaching.max_pending_per_stage} pending, "
        f"{coaching.max_unproven_per_stage} unproven; "
        f"{coaching.max_alternatives_per_situation} alternatives per situation; "
        f"leases {coaching.lease_s:g} s",
        f"workers:  queues {', '.join(settings.workers.queues)}; {_worker_shape(settings)} "
        "(start them with `gencoach worker` and the same configuration)",
        f"output:   {Path(settings.output_dir).resolve()}",
    ]
    return lines


def _worker_shape(settings: Settings) -> str:
    workers = settings.workers
    if workers.mode == "fork":
        return f"{workers.processes} forking processes, one job each"
    return f"{workers.processes} process(es) x {workers.concurrency} jobs at once"
