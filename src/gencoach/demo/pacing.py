"""How long the demo waits for a model: given by options, or scaled from a measured call.

`Pacing` holds the demo's waits; `demo_pacing` keeps those given and scales the others
(`Pacing.scaled`) from one call measured before the demo starts (`measure_call_s`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields, replace

import httpx

# Seconds the demo's own defaults assume one model call takes.
ASSUMED_CALL_S = 2.0
MAX_WALL_FACTOR = 4.0
PROBE_TIMEOUT_S = 300.0
# About 500 tokens of context, as a diagnosis prompt has, then a short JSON answer.
_PROBE_CONTEXT = "DECISION: panda.press_button(id=sw0); EXECUTION RESULT: ok.\n" * 40


@dataclass(frozen=True)
class Pacing:
    """The demo's waits, in seconds: the generator's agent timeout, a branch's grace, each
    scenario's time, the workers' job timeout and the backend's request timeout. A small
    model on a CPU can take tens of seconds per answer."""

    agent_timeout_s: float = 60.0
    branch_grace_s: float = 30.0
    max_wall_s: float = 75.0
    job_timeout_s: float = 120.0
    llm_timeout_s: float = 120.0

    def scaled(self, call_s: float) -> Pacing:
        """These waits stretched for a model whose calls take `call_s` (never shortened):
        timeouts and the branch grace fully, each scenario's time at most
        `MAX_WALL_FACTOR` times, to keep the demo a demo."""
        factor = max(1.0, call_s / ASSUMED_CALL_S)
        return Pacing(
            agent_timeout_s=self.agent_timeout_s * factor,
            branch_grace_s=self.branch_grace_s * factor,
            max_wall_s=self.max_wall_s * min(factor, MAX_WALL_FACTOR),
            job_timeout_s=self.job_timeout_s * factor,
            llm_timeout_s=self.llm_timeout_s * factor,
        )


def measure_call_s(endpoint: str, model: str, timeout_s: float = PROBE_TIMEOUT_S) -> float | None:
    """The seconds one diagnosis-sized chat takes at `endpoint`, or None when it fails
    (its prompt is about as long as a diagnosis prompt: prefill dominates on a CPU)."""
    body = {
        "model": model,
        "messages": [
            {"role": "system", "content": _PROBE_CONTEXT},
            {"role": "user", "content": 'Answer with {"ok": true}.'},
        ],
        "max_tokens": 16,
        "temperature": 0,
    }
    started = time.monotonic()
    try:
        response = httpx.post(endpoint, json=body, timeout=timeout_s)
    except httpx.HTTPError:
        return None
    return time.monotonic() - started if response.is_success else None


def demo_pacing(
    endpoint: str | None, model: str | None, given: dict[str, float]
) -> tuple[Pacing, float | None]:
    """The waits given, the others the defaults scaled from one measured call to the model
    (when there is one); and that call's seconds, None when none was measured."""
    pacing = Pacing()
    call_s = None
    if endpoint is not None and model is not None and len(given) < len(fields(Pacing)):
        call_s = measure_call_s(endpoint, model)
        if call_s is not None:
            pacing = pacing.scaled(call_s)
    return replace(pacing, **given), call_s
