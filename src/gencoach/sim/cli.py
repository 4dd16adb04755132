"""`gencoach sim run`: play a reference scenario against an agent and report it to gencoach.

Every mistake on the command line ends in one line on stderr that names the option and,
where there are choices, lists them (exit 2); a run that cannot report exits 1, and so
does a run whose agent crashed or where no stage ended, after its summary, naming why
(`gencoach.sim.verdict`). `gencoach sim gym` does the same for an adapter's runs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

# Typer vendors click (since 0.20): its parser and usage errors live in `typer._click`.
from typer._click.core import Context as ClickContext
from typer._click.exceptions import UsageError
from typer.core import TyperCommand

from gencoach.constants import DEFAULT_PREFIX
from gencoach.sim.catalog import SCENARIO_DESCRIPTIONS as SCENARIOS

if TYPE_CHECKING:
    from pydantic import ValidationError

    from gencoach.sim.options import GenerationOptions

EXIT_RUN_FAILED = 1
EXIT_USAGE = 2

sim_app = typer.Typer(
    help="The reference simulator: tabletop scenarios played against an agent.",
    no_args_is_help=True,
)


class OneLineErrors(TyperCommand):
    """A command whose usage errors print as one line (`gencoach sim run: …`), exit 2."""

    def parse_args(self, ctx: ClickContext, args: list[str]) -> list[str]:
        """Parse as usual; a usage error becomes one line on stderr."""
        try:
            return super().parse_args(ctx, args)
        except UsageError as error:
            fail(error.format_message())


def fail(message: str, code: int = EXIT_USAGE, command: str = "sim run") -> NoReturn:
    """Print `gencoach <command>: <message>` on one line and exit with `code`."""
    typer.echo(f"gencoach {command}: {' '.join(message.split())}", err=True)
    raise typer.Exit(code)


def _first_problem(error: ValidationError) -> str:
    problem = error.errors()[0]
    names = {"log_path": "log", "api_token": "api-token-env"}
    fields = [names.get(str(part), str(part).replace("_", "-")) for part in problem["loc"]]
    message = str(problem["msg"]).removeprefix("Value error, ")
    return f"--{'.'.join(fields)}: {message}" if fields else message


Scenario = Annotated[
    str,
    typer.Option(
        metavar="<name>",
        help="The scenario to play: "
        + "; ".join(f"{name}: {text.rstrip('.')}" for name, text in SCENARIOS.items())
        + ".",
    ),
]


# `sim run` and `sim gym` wait for gencoach's settled answer alike.
BranchGrace = Annotated[
    float,
    typer.Option(
        min=0.0,
        help="Once every branch ended, the longest wait for gencoach to say no branch "
        "order can come (the run ends as soon as it does).",
    ),
]


@sim_app.command("run", cls=OneLineErrors)
def run(
    ctx: typer.Context,
    agent_url: Annotated[
        str, typer.Option(help="The protocol-2.0 agent to ask (its base URL, without /v1).")
    ],
    scenario: Scenario = "buttons",
    redis_url: Annotated[
        str | None,
        typer.Option(
            help="Report through this Redis (events stream); also receives branch orders and "
            "saves the world states the teacher reads. Default: the Redis of gencoach's "
            "configuration (--config, ./gencoach.yaml or GENCOACH_REDIS__URL) when there is "
            "one, the embedded one serve started included; else the run is standalone."
        ),
    ] = None,
    api_url: Annotated[
        str | None,
        typer.Option(help="Report through gencoach's HTTP API instead (events only, no orders)."),
    ] = None,
    api_token_env: Annotated[
        str | None,
        typer.Option(help="Environment variable holding the HTTP API's bearer token."),
    ] = None,
    key_prefix: Annotated[
        str, typer.Option(help="gencoach's Redis key prefix (redis.key_prefix).")
    ] = DEFAULT_PREFIX,
    run_id: Annotated[
        str | None, typer.Option(help="The run id (default: sim-<scenario>-<random>).")
    ] = None,
    seed: Annotated[
        int, typer.Option(help="Seed of environment 0; environment k uses seed+k.")
    ] = 0,
    envs: Annotated[int, typer.Option(min=1, help="Environments played in parallel.")] = 1,
    branches: Annotated[
        int, typer.Option(min=1, help="Candidates asked for each fresh situation (nb_branch).")
    ] = 2,
    continue_per_situation: Annotated[
        int, typer.Option(min=1, help="Valid candidates per situation whose branch continues.")
    ] = 1,
    concurrency: Annotated[int, typer.Option(min=1, help="Agent requests in flight at most.")] = 8,
    timeout_s: Annotated[
        float, typer.Option(min=0.001, help="Seconds an agent request may take.")
    ] = 60.0,
    max_decisions: Annotated[
        int | None, typer.Option(min=1, help="Stop asking once this many candidates exist.")
    ] = None,
    max_wall_s: Annotated[
        float | None, typer.Option(min=0.001, help="Stop asking after this many seconds.")
    ] = None,
    injection_probability: Annotated[
        float,
        typer.Option(min=0, max=1, help="Chance that a call fails by injection (once a stage)."),
    ] = 0.0,
    branch_grace_s: BranchGrace = 60.0,
    log: Annotated[
        Path | None,
        typer.Option(
            "--log",
            dir_okay=False,
            help="Also write every event to this JSONL file "
            "(standalone default: <run_id>.events.jsonl).",
        ),
    ] = None,
) -> None:
    """Play a scenario against an agent, report every node to gencoach, execute branch orders."""
    import anyio
    import redis
    from pydantic import ValidationError

    from gencoach.errors import AgentCallError
    from gencoach.reporting.client import ReportError
    from gencoach.runtime.logs import configure_logging
    from gencoach.sim.generator import run_generation
    from gencoach.sim.options import GenerationOptions

    if scenario not in SCENARIOS:
        fail(f"--scenario: unknown scenario {scenario!r}; valid choices: {', '.join(SCENARIOS)}")
    if redis_url is not None and api_url is not None:
        fail("give --redis-url or --api-url, not both (neither: standalone, log only)")
    if redis_url is None and api_url is None:
        configured = _configured_redis(getattr(ctx.find_root().obj, "config_path", None))
        if configured is not None:
            redis_url = configured[0]
            key_prefix = configured[1] if key_prefix == DEFAULT_PREFIX else key_prefix
    token = None
    if api_token_env is not None:
        token = os.environ.get(api_token_env)
        if not token:
            fail(f"--api-token-env: the variable {api_token_env} is not set")
    configure_logging("warning")
    try:
        options = GenerationOptions(
            scenario=scenario,
            agent_url=agent_url,
            redis_url=redis_url,
            api_url=api_url,
            api_token=token,
            key_prefix=key_prefix,
            run_id=run_id,
            seed=seed,
            envs=envs,
            branches=branches,
            continue_per_situation=continue_per_situation,
            concurrency=concurrency,
            timeout_s=timeout_s,
            max_decisions=max_decisions,
            max_wall_s=max_wall_s,
            injection_probability=injection_probability,
            branch_grace_s=branch_grace_s,
            log_path=log,
        )
    except ValidationError as error:
        fail(_first_problem(error))
    try:
        report = anyio.run(run_generation, options)
    except (ReportError, AgentCallError, OSError) as error:
        fail(str(error), EXIT_RUN_FAILED)
    except redis.RedisError as error:
        fail(f"Redis: {error}", EXIT_RUN_FAILED)
    typer.echo(report.summary())
    typer.echo(_destination(options))
    failed = report.failure()
    if failed is not None:
        fail(failed, EXIT_RUN_FAILED)


def _configured_redis(path: Path | None) -> tuple[str, str] | None:
    """The Redis (URL, key prefix) gencoach's configuration names, when there is one.

    A config file (`--config`, else ./gencoach.yaml) or `GENCOACH_REDIS__URL` makes the
    run report where `serve` reads: the embedded Redis `serve` started for the same
    output dir, or the configured server. With neither, the run stays standalone.
    """
    from gencoach.config import load_settings
    from gencoach.config.files import find_config_file
    from gencoach.errors import ConfigError, RedisError
    from gencoach.runtime.connections import EMBEDDED, running_embedded

    if find_config_file(path) is None and "GENCOACH_REDIS__URL" not in os.environ:
        return None
    try:
        settings = load_settings(path, os.environ)
    except ConfigError as error:
        fail(" ".join(str(error).split()))
    url = settings.redis.url
    if url == EMBEDDED:
        try:
            url = running_embedded(settings.output_dir)
        except RedisError as error:
            fail(str(error), EXIT_RUN_FAILED)
    return url, settings.redis.key_prefix


def _destination(options: GenerationOptions) -> str:
    """Where the run's events went, for the line after the summary."""
    from gencoach.config.redaction import mask_password

    if options.redis_url is not None:
        stream = f"{options.key_prefix}:events"
        return f"reported to Redis {mask_password(options.redis_url)} (stream {stream})"
    if options.api_url is not None:
        return f"reported to {options.api_url}"
    return "reported to no gencoach (standalone): give --redis-url or --api-url to report"


@sim_app.command("gym", cls=OneLineErrors)
def gym(
    ctx: typer.Context,
    adapter: Annotated[
        str,
        typer.Argument(
            metavar="MODULE:ADAPTER",
            help="The env's adapter (a GymAdapter instance or class), e.g. "
            "gencoach.integrations.minigrid:put_next_local.",
        ),
    ],
    agent: Annotated[
        str, typer.Option("--agent", help="The protocol-2.0 agent to ask (its base URL).")
    ],
    runs: Annotated[int, typer.Option(min=1, help="Runs to play (run k plays seed+k).")] = 1,
    concurrency: Annotated[int, typer.Option(min=1, help="Runs in play at once.")] = 8,
    redis_url: Annotated[
        str | None,
        typer.Option(help="gencoach's Redis (default: the one its configuration names)."),
    ] = None,
    key_prefix: Annotated[
        str, typer.Option(help="gencoach's Redis key prefix (redis.key_prefix).")
    ] = DEFAULT_PREFIX,
    seed: Annotated[int, typer.Option(help="Seed of run 0.")] = 0,
    branches: Annotated[int, typer.Option(min=1, help="Candidates asked for each situation.")] = 1,
    branch_grace_s: BranchGrace = 60.0,
    timeout_s: Annotated[
        float, typer.Option(min=0.001, help="Seconds an agent request may take.")
    ] = 60.0,
    campaign: Annotated[
        str | None,
        typer.Option(
            "--campaign",
            help="The campaign's name: run ids are <campaign>-<seed>, and running the same "
            "campaign again resumes its unfinished runs (default: a new gym-<name>-<hex>).",
        ),
    ] = None,
    max_connections: Annotated[
        int, typer.Option(min=2, help="Redis connections all runs share (one pool).")
    ] = 8,
) -> None:
    """Play a Gymnasium env's adapter against an agent under gencoach (see docs/integrations.md)."""
    import anyio
    import redis

    from gencoach.reporting.client import ReportError
    from gencoach.runtime.logs import configure_logging

    try:
        from gencoach.integrations.gymnasium import CampaignOptions, run_campaign
        from gencoach.integrations.gymnasium.cli import load_adapter
    except ImportError as error:
        fail(
            f"{error}; install the gym extra: pip install 'gencoach[gym]'",
            EXIT_RUN_FAILED,
            "sim gym",
        )
    try:
        loaded = load_adapter(adapter)
    except ValueError as error:
        fail(f"MODULE:ADAPTER: {error}", command="sim gym")
    if redis_url is None:
        configured = _configured_redis(getattr(ctx.find_root().obj, "config_path", None))
        if configured is None:
            fail(
                "--redis-url: no Redis given and no gencoach configuration names one",
                command="sim gym",
            )
        redis_url = configured[0]
        key_prefix = configured[1] if key_prefix == DEFAULT_PREFIX else key_prefix
    configure_logging("warning")
    options = CampaignOptions(
        adapter=loaded,
        agent_url=agent,
        redis_url=redis_url,
        key_prefix=key_prefix,
        runs=runs,
        concurrency=concurrency,
        seed=seed,
        branches=branches,
        settle_timeout_s=branch_grace_s,
        timeout_s=timeout_s,
        campaign=campaign,
        max_connections=max_connections,
    )
    try:
        report = anyio.run(run_campaign, options)
    except (ReportError, OSError) as error:
        fail(str(error), EXIT_RUN_FAILED, "sim gym")
    except redis.RedisError as error:
        fail(f"Redis: {error}", EXIT_RUN_FAILED, "sim gym")
    typer.echo(report.summary())
    failed = report.failure()
    if failed is not None:
        fail(failed, EXIT_RUN_FAILED, "sim gym")
