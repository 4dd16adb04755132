"""`gencoach check-agent URL`: every check an agent must pass, one line per check.

`check_agent` runs the checks (its docstring lists them; they live in
`gencoach.agents.checks`); `run_check_agent` prints them and gives the exit code.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from functools import partial

import anyio
import httpx

from gencoach.agents.checks.coaching import CoachingChecks
from gencoach.agents.checks.protocol import (
    check_candidates,
    check_errors,
    check_health,
    check_memory,
    check_single,
    check_strict,
    read_info,
)
from gencoach.agents.checks.results import (
    CheckFailedError,
    CheckResult,
    Target,
    failed,
    run_check,
    skipped,
)
from gencoach.agents.checks.stub import StubBackend


async def check_agent(
    url: str, *, timeout_s: float = 10.0, backend_endpoint: str | None = None
) -> list[CheckResult]:
    """Run every check against the agent at `url`, in order.

    The checks send real requests: health, info (strict, protocol 2.0), answers to one and
    to several inputs with 2 and 3 candidates (count, order, ids), invalid requests (422),
    memory as a full replacement, error candidates' shape, and, when the agent announces
    coaching, a session on a stub backend the checker serves on loopback (or on
    `backend_endpoint`, for an agent elsewhere), repairs of each announced kind gencoach
    routes at offered points only (each proposal's `extra_keys` the payload itself), their
    reinjection as MAGMA-GEN makes it (the payload as `extra_keys.coaching`) answered with
    the correction, and closing the session.
    """
    async with httpx.AsyncClient(timeout=timeout_s) as http:
        target = Target(url.rstrip("/"), http)
        try:
            health = await check_health(target)
        except CheckFailedError as error:
            return [failed("health", f"{error.reason}; is the agent running at {url}?")]
        results = [health]
        try:
            info, _, info_results = await read_info(target)
        except CheckFailedError as error:
            info, info_results = None, [failed("info.strict", error.reason)]
        results += info_results
        checks: list[tuple[str, Callable[[Target], Awaitable[CheckResult]]]] = [
            ("responses.single", check_single),
            ("responses.candidates", check_candidates),
            ("responses.strict", check_strict),
            ("memory.replacement", check_memory),
        ]
        for name, check in checks:
            results.append(await run_check(name, partial(check, target)))
        results.append(check_errors(target))
        if info is None:
            results.append(
                skipped("coaching", "/v1/info did not validate, so what it announces is unknown")
            )
        elif not info.routed_kinds:
            ignored = f" (ignored: {', '.join(info.ignored_kinds)})" if info.ignored_kinds else ""
            reason = f"the agent announces no specialized coaching gencoach routes{ignored}"
            results.append(skipped("coaching", reason))
        else:
            with ExitStack() as stack:
                endpoint = backend_endpoint or stack.enter_context(StubBackend()).endpoint
                results += await CoachingChecks(target, info, endpoint).run()
        return results


def run_check_agent(
    url: str, *, timeout_s: float = 10.0, backend_endpoint: str | None = None
) -> int:
    """Print one line per check and return the exit code: 0 when every check passed, else 1."""
    results = anyio.run(
        lambda: check_agent(url, timeout_s=timeout_s, backend_endpoint=backend_endpoint)
    )
    for result in results:
        print(result.line())
    failures = sum(not result.passed for result in results)
    print(
        f"{len(results) - failures} of {len(results)} checks passed"
        if failures
        else f"all {len(results)} checks passed"
    )
    return 1 if failures else 0
