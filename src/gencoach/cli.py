"""The `gencoach` command: one subcommand per role, configuration read once here."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from typer.core import TyperOption

from gencoach.__about__ import __version__
from gencoach.agents.cli import StructuredOutputChoice, agent_app, check_agent
from gencoach.library.cli import library_app
from gencoach.sim.catalog import SCENARIO_DESCRIPTIONS as SCENARIOS
from gencoach.sim.cli import sim_app

if TYPE_CHECKING:
    from gencoach.config import Settings

# Each command imports what it needs when it runs, so `--version`, `--help`, `health` and
# `config check` start without the web framework, RQ or the controller, and `save`, `export`
# and `library` load their own code only (tests/test_cli.py checks the modules loaded).

_option_type = TyperOption.display_type_rich


def _option_type_shown(option: TyperOption, ctx: typer.Context) -> str | None:
    """A flag's help row shows no `<bool>` (the flag itself says it takes no value), and a
    number's range (which typer appends to the type, `<int range> [x>=1]`) goes on a
    line of its own below `<int>`, so that the type column stays narrow and an 80-column
    help never cuts an option's name."""
    if option.is_flag:
        return None
    shown = _option_type(option, ctx)
    if shown and option._get_number_range_help_str():
        return shown.replace(" range>", ">") + "\n"
    return shown


TyperOption.display_type_rich = _option_type_shown  # type: ignore[method-assign,assignment]

app = typer.Typer(
    name="gencoach",
    help="Coaching orchestration for agent data generation.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
config_app = typer.Typer(help="Inspect the configuration.", no_args_is_help=True)
app.add_typer(config_app, name="config")
app.add_typer(agent_app, name="agent")
app.command("check-agent")(check_agent)
app.add_typer(sim_app, name="sim")
app.add_typer(library_app, name="library")

EXIT_BAD_CONFIG = 2
CONFIG_HELP = (
    "YAML settings file (default: ./gencoach.yaml if present). "
    "GENCOACH_* environment variables override it, nested with '__'."
)
# Every command that reads the settings takes --config after its name too
# (`gencoach serve --config F`), as well as before it (`gencoach --config F serve`).
ConfigOption = Annotated[
    Path | None, typer.Option("--config", "-c", help=CONFIG_HELP, dir_okay=False)
]


@dataclass
class CliState:
    """What the root options chose, handed to every subcommand."""

    config_path: Path | None


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"gencoach {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    config: ConfigOption = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", callback=_print_version, is_eager=True
        ),
    ] = False,
) -> None:
    """Coaching orchestration for agent data generation."""
    ctx.obj = CliState(config_path=config)


def sole_cause(error: BaseException) -> BaseException:
    """The one exception a chain of single-member exception groups wraps (or `error`)."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def config_path(ctx: typer.Context, own: Path | None) -> Path | None:
    """The settings file: the command's own `--config`, else the root's; both must agree."""
    state: CliState = ctx.obj
    root = state.config_path
    if own is not None and root is not None and own != root:
        typer.echo(f"--config given twice, as {root} and as {own}: give it once", err=True)
        raise typer.Exit(EXIT_BAD_CONFIG)
    return own or root


def load_or_exit(path: Path | None) -> Settings:
    """Load the settings, or print every problem and exit with status 2."""
    from gencoach.config import load_settings, redacted, scrubbing
    from gencoach.errors import ConfigError
    from gencoach.runtime.logs import configure_logging, get_logger

    try:
        settings = load_settings(path, os.environ)
    except ConfigError as error:
        typer.echo(str(error), err=True)
        raise typer.Exit(EXIT_BAD_CONFIG) from None
    scrubbing.install(scrubbing.secret_values(settings))
    configure_logging(settings.log.level, settings.log.format)
    log = get_logger("cli")
    if settings.ignored_sections:
        log.info(
            "config.magma_sections_ignored",
            sections=settings.ignored_sections,
            reason="MAGMA's own settings; gencoach does not read them",
        )
    for warning in settings.warnings:
        log.warning("config.warning", message=warning)
    log.debug("config.loaded", config=redacted(settings))
    return settings


@config_app.command("check")
def config_check(
    ctx: typer.Context,
    file: Annotated[
        Path | None,
        typer.Argument(help="Settings file to check (default: --config, else ./gencoach.yaml)."),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Print the effective configuration with secrets redacted, or every problem (exit 2).
    Settings `serve` would refuse (the API beyond loopback without a token) are said too."""
    import yaml

    from gencoach.config import redacted
    from gencoach.config.exposure import unprotected_exposure

    settings = load_or_exit(file or config_path(ctx, config))
    typer.echo(yaml.safe_dump(redacted(settings), sort_keys=False), nl=False)
    exposure = unprotected_exposure(settings.api)
    if exposure is not None:
        typer.echo(f"gencoach config check: `gencoach serve` would exit 2, {exposure}", err=True)


def _installed(module: str) -> bool:
    """Whether `module` can be imported, without importing it."""
    import importlib.util

    return importlib.util.find_spec(module) is not None


@app.command()
def demo(
    output: Annotated[
        Path, typer.Option("--output", file_okay=False, help="Where the demo's folder goes.")
    ] = Path("output"),
    redis: Annotated[
        str | None, typer.Option("--redis-url", help="Use this Redis (default: embedded).")
    ] = None,
    env: Annotated[
        str,
        typer.Option(
            "--env",
            help="reference (the tabletop scenarios), babyai (minigrid's BabyAI levels, "
            "coached by the BabyAI bot) or MODULE:ADAPTER (any Gymnasium adapter, played by "
            "the env agent and coached by its module's oracle teacher); the last two need "
            "the gym extra.",
        ),
    ] = "reference",
    scenario: Annotated[
        list[str] | None,
        typer.Option("--scenario", help=f"Repeatable; default all: {', '.join(SCENARIOS)}."),
    ] = None,
    envs: Annotated[int, typer.Option(min=1, help="Environments (BabyAI: runs) per scenario.")] = 2,
    branches: Annotated[int, typer.Option(min=1, help="Candidates per fresh situation.")] = 2,
    seed: Annotated[int, typer.Option(help="Seed of the world and of the agent's mistakes.")] = 7,
    max_wall_s: Annotated[
        float | None,
        typer.Option("--max-wall-s", min=5, help="Time budget of each scenario's run [75]."),
    ] = None,
    llm_endpoint: Annotated[
        str | None,
        typer.Option(help="A chat-completions URL: a real model coaches and decides."),
    ] = None,
    model: Annotated[str | None, typer.Option(help="The model, with --llm-endpoint.")] = None,
    structured_output: Annotated[
        StructuredOutputChoice,
        typer.Option(
            metavar="<mode>",
            help="How the model is asked for JSON: auto (finds what the server takes), "
            "json_schema, json_object or none.",
        ),
    ] = StructuredOutputChoice.auto,
    coach_with_llm: Annotated[
        bool,
        typer.Option(
            "--coach-with-llm", help="Keep the scripted agent; only coaching uses the model."
        ),
    ] = False,
    agent_timeout_s: Annotated[
        float | None, typer.Option("--agent-timeout", min=1, help="Seconds per agent answer [60].")
    ] = None,
    branch_grace_s: Annotated[
        float | None,
        typer.Option("--branch-grace", min=0, help="Longest wait for a run to settle [30]."),
    ] = None,
    job_timeout_s: Annotated[
        float | None, typer.Option("--job-timeout", min=1, help="Seconds per coaching job [120].")
    ] = None,
    llm_timeout_s: Annotated[
        float | None, typer.Option("--llm-timeout", min=1, help="Seconds per model call [120].")
    ] = None,
) -> None:
    """Run everything on this machine: Redis, controller, workers, agent and simulator."""
    from rich.console import Console

    from gencoach.demo import DemoOptions, run_demo
    from gencoach.demo.pacing import demo_pacing
    from gencoach.runtime.logs import configure_logging

    unknown = sorted(set(scenario or ()) - set(SCENARIOS))
    if unknown:
        typer.echo(f"unknown scenario {unknown[0]!r}; valid: {', '.join(SCENARIOS)}", err=True)
        raise typer.Exit(2)
    if (llm_endpoint is None) != (model is None):
        typer.echo("give --llm-endpoint and --model together", err=True)
        raise typer.Exit(2)
    if coach_with_llm and llm_endpoint is None:
        typer.echo("--coach-with-llm needs --llm-endpoint and --model", err=True)
        raise typer.Exit(2)
    configure_logging("warning", "console")
    given = {
        "agent_timeout_s": agent_timeout_s,
        "branch_grace_s": branch_grace_s,
        "max_wall_s": max_wall_s,
        "job_timeout_s": job_timeout_s,
        "llm_timeout_s": llm_timeout_s,
    }
    pacing, call_s = demo_pacing(
        llm_endpoint, model, {name: value for name, value in given.items() if value is not None}
    )
    if call_s is not None:
        typer.echo(f"one model call took {call_s:.1f} s; waits not given are scaled to it")
    if env not in ("reference", "babyai") and ":" not in env:
        typer.echo(f"--env: {env!r} is not reference, babyai nor MODULE:ADAPTER", err=True)
        raise typer.Exit(2)
    if env == "babyai" and llm_endpoint is not None:
        typer.echo("--env babyai is coached by the BabyAI bot, without --llm-endpoint", err=True)
        raise typer.Exit(2)
    needed = {"reference": (), "babyai": ("gymnasium", "minigrid")}.get(env, ("gymnasium",))
    if not all(map(_installed, needed)):
        typer.echo(
            f"--env {env} needs the gym extra ({', '.join(needed)}): "
            "pip install 'gencoach[gym]', or .venv/bin/pip install -e '.[gym]' in a clone",
            err=True,
        )
        raise typer.Exit(2)
    options = DemoOptions(
        output_dir=output,
        redis_url=redis,
        env=env,
        scenarios=tuple(scenario or SCENARIOS),
        envs=envs,
        branches=branches,
        seed=seed,
        llm_endpoint=llm_endpoint,
        model=model,
        structured_output=structured_output.value,
        coach_with_llm=coach_with_llm,
        pacing=pacing,
    )
    raise typer.Exit(run_demo(options, Console(soft_wrap=True)))


@app.command()
def health(
    ctx: typer.Context,
    timeout_s: Annotated[
        float, typer.Option("--timeout", help="Seconds to wait for each answer.")
    ] = 3.0,
    wait_s: Annotated[
        float,
        typer.Option("--wait", min=0, help="Ask again until healthy, for up to this many seconds."),
    ] = 0.0,
    url: Annotated[
        str | None,
        typer.Option(
            "--url", help="Any server's base URL to ask for /health (default: the controller's)."
        ),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Exit 0 when the controller's HTTP API (or --url's server) answers ready, 1 otherwise."""
    import time

    import httpx

    from gencoach.config.urls import api_url

    if url is None:
        settings = load_or_exit(config_path(ctx, config))
        url = api_url(settings.api.host, settings.api.port)
    url = f"{url.rstrip('/')}/health"
    deadline = time.monotonic() + wait_s
    while True:
        try:
            response = httpx.get(url, timeout=timeout_s)
        except httpx.HTTPError as error:
            problem = f"unhealthy: {url} unreachable ({error})"
        else:
            if response.status_code == httpx.codes.OK:
                typer.echo(f"healthy: {url}")
                return
            problem = f"unhealthy: {url} answered {response.status_code}"
        if time.monotonic() >= deadline:
            typer.echo(problem, err=True)
            raise typer.Exit(1)
        time.sleep(0.2)


@app.command()
def status(
    ctx: typer.Context,
    watch: Annotated[
        bool, typer.Option("--watch", "-w", help="Redraw every --interval seconds until Ctrl-C.")
    ] = False,
    interval_s: Annotated[
        float, typer.Option("--interval", min=0.2, help="Seconds between redraws.")
    ] = 2.0,
    url: Annotated[
        str | None,
        typer.Option("--url", help="The controller's API (default: api.host and api.port)."),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Runs, the coaching funnel per route, jobs, queues and backends, from /metrics."""
    from gencoach.config.urls import api_url
    from gencoach.status.command import show_status

    if url is None:
        settings = load_or_exit(config_path(ctx, config))
        url = api_url(settings.api.host, settings.api.port)
    raise typer.Exit(show_status(url.rstrip("/"), watch=watch, every_s=interval_s))


@app.command()
def serve(ctx: typer.Context, config: ConfigOption = None) -> None:
    """Run the controller daemon until SIGTERM or Ctrl-C (SIGHUP reloads the budgets)."""
    import socket

    import anyio

    from gencoach.config import load_settings
    from gencoach.config.exposure import unprotected_exposure
    from gencoach.config.summary import startup_summary
    from gencoach.console import mount_live_console
    from gencoach.constants import Keys
    from gencoach.errors import RedisError
    from gencoach.runtime.connections import redis_url
    from gencoach.service.controller import ControllerOptions, run_controller
    from gencoach.service.dispatching.dispatch import RQDispatcher

    path = config_path(ctx, config)
    settings = load_or_exit(path)
    exposure = unprotected_exposure(settings.api)
    if exposure is not None:
        typer.echo(f"gencoach serve: {exposure}", err=True)
        raise typer.Exit(EXIT_BAD_CONFIG)
    try:
        with redis_url(settings.redis.url, settings.output_dir) as url:
            typer.echo("\n".join(startup_summary(settings, url)))
            options = ControllerOptions(
                settings=settings,
                redis_url=url,
                consumer=settings.controller.consumer or f"{socket.gethostname()}-{os.getpid()}",
                dispatcher=lambda: RQDispatcher(
                    url, Keys(settings.redis.key_prefix), settings.workers.job_timeout_s
                ),
                reload=lambda: load_settings(path, os.environ),
                extend_api=lambda app, ctx: mount_live_console(app, ctx, settings, url),
            )
            anyio.run(run_controller, options)
    except (RedisError, OSError, ExceptionGroup) as error:
        cause = sole_cause(error)
        if not isinstance(cause, RedisError | OSError):
            raise
        typer.echo(f"gencoach serve: {cause}", err=True)
        raise typer.Exit(1) from None


@app.command()
def worker(
    ctx: typer.Context,
    processes: Annotated[
        int | None,
        typer.Option(
            "--processes", "-p", min=1, help="Worker processes (default: workers.processes)."
        ),
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency",
            "-j",
            min=1,
            help="Jobs in flight per process, async mode (default: workers.concurrency).",
        ),
    ] = None,
    mode: Annotated[
        str | None,
        typer.Option(
            "--mode", help="async: many jobs per process; fork: one per forked work-horse."
        ),
    ] = None,
    queue: Annotated[
        list[str] | None,
        typer.Option(
            "--queue",
            "-q",
            help="A queue to serve, in priority order; repeatable (default: workers.queues).",
        ),
    ] = None,
    burst: Annotated[bool, typer.Option("--burst", help="Exit once the queues are empty.")] = False,
    config: ConfigOption = None,
) -> None:
    """Run RQ workers, each serving every queue in order; SIGTERM: warm stop, a second: cold."""
    from gencoach.errors import RedisError
    from gencoach.runtime.connections import redis_url
    from gencoach.workers.pool import run_workers

    settings = load_or_exit(config_path(ctx, config))
    if mode not in (None, "async", "fork"):
        typer.echo(f"gencoach worker: --mode must be async or fork, not {mode!r}", err=True)
        raise typer.Exit(2)
    try:
        with redis_url(settings.redis.url, settings.output_dir, start=False) as url:
            code = run_workers(
                settings,
                url,
                processes=processes or settings.workers.processes,
                queues=queue or settings.workers.queues,
                burst=burst,
                mode="fork" if mode == "fork" else "async" if mode == "async" else None,
                concurrency=concurrency,
            )
    except RedisError as error:
        typer.echo(f"gencoach worker: {error}", err=True)
        raise typer.Exit(1) from None
    raise typer.Exit(code)


@app.command("export")
def export(
    source: Annotated[Path, typer.Argument(help="A run folder or any folder above runs.")],
    fmt: Annotated[
        str, typer.Option("--format", "-f", help="chat, full-history, preference, or a plugin's.")
    ] = "",
    agent: Annotated[
        str | None,
        typer.Option("--agent", help="Export with this MAGMA exporter (magma.export.gen)."),
    ] = None,
    any_agent: Annotated[
        bool, typer.Option("--any-agent", help="Export saves of every producer.")
    ] = False,
    from_agents: Annotated[
        list[str] | None,
        typer.Option("--from", help="Repeatable AGENT[@VERSION]: producers to export."),
    ] = None,
    cases: Annotated[
        list[str] | None,
        typer.Option("--case", help="Repeatable: only saves of this scenario or target."),
    ] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="Only runs started at or after (ISO 8601).")
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="At most N newest runs per agent.")
    ] = None,
    dedupe: Annotated[
        bool | None,
        typer.Option("--dedupe/--no-dedupe", help="chat, full-history: each identical pair once."),
    ] = None,
    tokenizer: Annotated[
        Path | None,
        typer.Option("--tokenizer", help="GGUF file or HF model folder: count row tokens."),
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option("--max-tokens", min=1, help="Token budget per row.")
    ] = None,
    over_budget: Annotated[
        str, typer.Option("--over-budget", help="keep, drop or truncate rows over budget.")
    ] = "keep",
    split_by: Annotated[
        str, typer.Option("--split-by", help="task (scenario + target) or folder (MAGMA-GEN's).")
    ] = "task",
    options: Annotated[
        Path | None,
        typer.Option("--options", dir_okay=False, help="A JSON object of format options."),
    ] = None,
    validation_ratio: Annotated[
        float, typer.Option("--validation-ratio", help="Share of tasks (or folders) held out.")
    ] = 0.05,
    split_seed: Annotated[int, typer.Option("--split-seed", help="Seed of the task split.")] = 42,
    shuffle_seed: Annotated[
        int, typer.Option("--shuffle-seed", help="Seed of tool and rule order shuffles.")
    ] = 42,
    skip_pre_made: Annotated[
        bool, typer.Option("--skip-pre-made", help="Reuse a complete, verified export.")
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option("--out", file_okay=False, help="Default: SOURCE/datasets/<format>."),
    ] = None,
    progress: Annotated[
        bool, typer.Option("--progress/--no-progress", help="A progress bar on a TTY.")
    ] = True,
) -> None:
    """Turn saved graphs into training datasets (no Redis, agent or backend needed)."""
    from gencoach.export.command import ExportFilters, export_command

    raise typer.Exit(
        export_command(
            source,
            fmt,
            options,
            validation_ratio,
            split_seed,
            shuffle_seed,
            skip_pre_made,
            out,
            progress,
            agent=agent,
            any_agent=any_agent,
            split_by=split_by,
            filters=ExportFilters(tuple(cases or ()), since, limit, tuple(from_agents or ())),
            dedupe=dedupe,
            tokens=(tokenizer, max_tokens, over_budget),
        )
    )


@app.command()
def save(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help="The run to save, finished or still going.")],
    config: ConfigOption = None,
) -> None:
    """Write a run's graph to the output dir now, in the MAGMA-GEN 2.0 format."""
    import anyio

    from gencoach.errors import RedisError
    from gencoach.runtime.connections import redis_url
    from gencoach.service.saving.persist import save_run

    settings = load_or_exit(config_path(ctx, config))
    try:
        with redis_url(settings.redis.url, settings.output_dir, start=False) as url:
            folder = anyio.run(save_run, settings, url, run_id)
    except RedisError as error:
        typer.echo(f"gencoach save: {error}", err=True)
        raise typer.Exit(1) from None
    if folder is None:
        typer.echo(f"gencoach save: unknown run {run_id!r}", err=True)
        raise typer.Exit(1)
    typer.echo(str(folder))


@app.command()
def audit(
    paths: Annotated[
        list[Path],
        typer.Argument(exists=True, help="Save folders, or folders above saves (searched)."),
    ],
    max_alternatives: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="The exploration budget to hold saves to (default: the one each save records).",
        ),
    ] = None,
) -> None:
    """Check a campaign's saves against the coaching invariants; exit 1 naming each broken one."""
    from gencoach.graph.audit import audit as audit_saves

    report = audit_saves(paths, max_alternatives)
    for violation in report.violations:
        typer.echo(str(violation))
    typer.echo(
        f"{report.saves} saves, {report.coached} coached candidates "
        f"({report.recovery_nodes} recovery), {report.proven_attempts} proven attempts: "
        + (f"{len(report.violations)} violations" if report.violations else "no violation")
    )
    if not report.saves:
        typer.echo("gencoach audit: no save found under the paths given", err=True)
        raise typer.Exit(2)
    if report.violations:
        raise typer.Exit(1)


@app.command()
def console(
    saves: Annotated[
        Path,
        typer.Option(
            "--saves", exists=True, file_okay=False, help="A save folder or any folder above saves."
        ),
    ],
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on.")] = 8760,
) -> None:
    """Serve the console's graph pages read-only over saved runs (no Redis needed)."""
    import uvicorn

    from gencoach.console import create_saves_app

    typer.echo(f"gencoach console: http://{host}:{port}/ over {saves.resolve()}")
    uvicorn.run(create_saves_app(saves), host=host, port=port, log_level="warning")


def main() -> None:
    """Entry point of the `gencoach` console script."""
    app()
