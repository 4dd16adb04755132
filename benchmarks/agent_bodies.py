"""What encoding an agent call's JSON body costs the client: gencoach's encoding (pydantic
writes the JSON, `AgentClient`) next to httpx's `json=` over the model's dumped dict, the
baseline, in the same run.

The body is the repair's `POST /v1/coaching` request (the protocol examples' steps, each
with its input, answer and execution) at 2, 10 and 40 steps of trajectory; each way is
timed `--n` times, the best of `--rounds` rounds kept.

    .venv/bin/python -m benchmarks.agent_bodies [--n 2000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import httpx

from gencoach.agent_client import json_body
from gencoach.protocol import SpecializedCoachingRequest
from tests.protocol.examples import coaching_request, coaching_step

STEPS = (2, 10, 40)


def request(steps: int) -> SpecializedCoachingRequest:
    """The protocol examples' coaching request with `steps` steps, the target last."""
    body = coaching_request()
    body["trajectory"] = [coaching_step(index) for index in range(1, steps + 1)]
    body["target_step_id"] = steps
    body["reinjection_points"][0]["input_step_id"] = steps
    return SpecializedCoachingRequest.model_validate(body)


def _best_us(call: Callable[[], object], n: int, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        for _ in range(n):
            call()
        best = min(best, (time.process_time() - started) / n)
    return best * 1e6


def main() -> None:
    """Print the CPU of each encoding and its ratio to the baseline."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    url = "http://127.0.0.1:1/v1/coaching"
    print(f"{'steps':>5} {'bytes':>7} {'json= (baseline) µs':>20} {'gencoach µs':>12} {'ratio':>6}")
    for steps in STEPS:
        body = request(steps)
        size = len(body.model_dump_json())

        def baseline(body: SpecializedCoachingRequest = body) -> object:
            return httpx.Request("POST", url, json=body.model_dump(mode="json"))

        def ours(body: SpecializedCoachingRequest = body) -> object:
            content, headers = json_body(body)
            return httpx.Request("POST", url, content=content, headers=headers)

        base = _best_us(baseline, args.n, args.rounds)
        now = _best_us(ours, args.n, args.rounds)
        print(f"{steps:>5} {size:>7,} {base:>20.1f} {now:>12.1f} {now / base:>6.2f}")


if __name__ == "__main__":
    main()
